// Package grpcapi implements toolcrib.lease.v1.LeaseService on the lease
// store, the signing-key ring, the single-use ledger and the decision
// interfaces; its [translate] is the one place typed errors become API
// errors.
package grpcapi
