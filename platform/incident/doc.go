// Package incident delivers unauthorized events to discovery's rollout
// guard (DiscoveryService.ReportIncident) off the hot path: a bounded
// queue, one sender, retries with backoff. Discovery stores an event id
// once, so a retry after a lost answer is harmless. The lease service
// (leases issued after a revocation) and admission (cached ALLOWs a
// re-check denies) both report through it.
package incident
