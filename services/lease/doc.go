// Package lease is the lease service (DESIGN §7a, I9, I10): short-lived,
// tool-scoped, holder-bound, single-use execution leases.
//
// [Run] serves toolcrib.lease.v1.LeaseService: Issue signs a lease for an
// ALLOW decision (cited by receipt through a [decision.ReceiptSource], or
// run inline through a [decision.Checker]) after committing its execution
// receipt; Verify checks a lease and its holder proof (the rules of
// github.com/toolcrib/toolcrib/revision/lease), revocation, frozen
// issuance, freshness (through a [decision.Freshness]) and consumes it once
// in Redis; Revoke and FreezeIssuance record what refuses leases;
// GetSigningKeys publishes the JWKS, old keys included until their leases
// have expired. Signing keys come from a key file (development) or any
// [keys.Source], never from the database.
//
// [keys.Source]: https://pkg.go.dev/github.com/toolcrib/toolcrib/services/lease/internal/keys#Source
package lease
