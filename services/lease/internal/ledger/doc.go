// Package ledger records which leases were used, so each runs one call
// (single use, I9): [Redis] consumes a lease id with `SET NX` and the
// lease's remaining lifetime, shared by every lease replica.
package ledger
