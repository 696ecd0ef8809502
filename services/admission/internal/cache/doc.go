// Package cache is admission's decision cache (DESIGN §7, I7): an
// in-process L1 (a bounded LRU) in front of a Redis L2 shared by replicas.
//
// Every key is built by one function, [Key.String], from every field a
// preliminary decision depends on: the I7 fields (tenant, audience class,
// policy epoch, generation, tool id, descriptor digest, scope-set digest,
// mode) plus the pointer's revision (a CLOSE keeps the generation), the
// plan's generation and the plan's epoch (they choose between reasons).
// The tenant is the first, length-prefixed field, so a key of one tenant
// can never equal a key of another: a cross-tenant hit is impossible by
// construction. A new epoch or generation is a new key, so invalidation is
// a bump, never a scan.
//
// The cache holds preliminary outcomes only (decision.Prelim); the argument
// check runs on every call after it. Redis is optional at run time: an
// error or a timeout is a miss, and after one the L2 is skipped for a back-off,
// so the hot path never waits on a dead Redis; writes to Redis go through a
// bounded queue off the hot path. A miss makes the caller decide directly,
// so Redis being down never allows anything the replica could not decide
// itself.
package cache
