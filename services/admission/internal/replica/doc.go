// Package replica is what one admission replica knows (DESIGN §7 "Shape of
// a replica"): the heads, kept live from the registry's and discovery's
// Watch streams ([Heads]: each tenant's policy epoch, each pointer's
// generation, state and fresh_until, each stream's newest heartbeat), and
// the immutable material a decision reads beyond them, fetched on a miss and
// cached without ever going stale because each piece is keyed by what makes
// it immutable ([Material]: a tenant's policy at epoch E, a tool's review at
// epoch E and descriptor digest D, a generation's tools).
//
// The sources are consumer-side interfaces ([Policies], [Catalog],
// [Reviews]) with their contracts in the doc comments; package
// services/admission wires them to the registry and discovery gRPC clients.
package replica
