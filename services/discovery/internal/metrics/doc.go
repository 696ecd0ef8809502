// Package metrics holds every Prometheus metric discovery exports, in one
// place: runs by state and reason, scan duration, pages and tools per scan,
// pointer moves, and the depth of the scan queue (River's jobs by state).
// [New] registers them on the service's registry (the one rpcserver serves
// at /metrics, beside the gRPC and Go runtime metrics); every method is a
// no-op on a nil [*Metrics], so code under test may pass none.
//
// Label values are enum names chosen by discovery (states, reasons, moves),
// never caller or server input, so the series stay bounded.
package metrics
