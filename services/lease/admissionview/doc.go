// Package admissionview is what the lease service needs from the rest of
// toolcrib, as consumer-side interfaces with their contracts: the
// admission decision a lease is issued for ([ReceiptSource], [Checker]) and
// whether the policy epoch and generation a lease is bound to are still
// current ([Freshness], fed by the shared Watch follower).
//
// [AdmissionChecker] implements [Checker] over AdmissionService.Check; the
// receipt lookup and the Watch follower are wired by whoever builds them.
package admissionview
