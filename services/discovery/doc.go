// Package discovery is toolcrib's discovery service (DESIGN §4, §6): scaled
// crawl workers on a Postgres job queue read MCP servers' `tools/list` page
// by page into immutable catalog snapshots, prove them whole against a
// source revision, validate them, and switch the active generation of each
// (server, audience class) with one compare-and-swap in Postgres (I1–I4,
// I10–I12).
//
// [ParseConfig] and [Run] are what `cmd/discovery`, the dev launcher and
// tests use; [Migrate] is the `migrate` subcommand. The packages are:
//
//   - crawl: the MCP client and page loop (public, for the fault suite);
//   - validate: validation of a whole catalog (public);
//   - candidate: crawl + validation, the outcome before the commit, and the
//     snapshot digest (public);
//   - registry: the registry as discovery sees it, an interface and its gRPC
//     client (public; [Config.Registry] takes any implementation);
//   - discoverytest: scripted MCP servers and a fake registry for tests;
//   - internal/store: Postgres, including the pointer CAS;
//   - internal/scan: River jobs, the scan flow, refresh, registry watch;
//   - internal/grpcapi: the DiscoveryService API.
package discovery
