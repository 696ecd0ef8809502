// Package metrics holds every Prometheus metric admission exports, in one
// place: decisions by reason, decision-cache answers by level, the age of
// each Watch stream's newest heartbeat and the receipts not yet stored.
// [New] registers them on the service's registry (the one rpcserver serves
// at /metrics); the methods are no-ops on a nil [*Metrics].
//
// [Freshness] logs each state change of the replica (caught up, stale,
// resynced) and never a line per call.
//
// Label values are enum names chosen by admission (reasons, cache levels,
// stream names), never caller input, so the series stay bounded.
package metrics
