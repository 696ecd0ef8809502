// Package ledger records which leases were used, so each runs one call
// (single use, I9), and which admission receipts were redeemed, so each
// decision gets at most one lease: [Redis] consumes a lease id, or claims a
// receipt id, with `SET NX` and the remaining lifetime, shared by every
// lease replica.
package ledger
