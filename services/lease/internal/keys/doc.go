// Package keys holds the lease service's signing keys: a [keyring.Ring]
// (the key source, rotation, the published JWKS, shared with admission's
// receipt keys) whose tokens live at most lease.MaxTTL, and which signs
// lease claims.
//
// A retired key stays published — in the JWKS of GetSigningKeys and in the
// key set Verify uses — until every lease it signed has expired: its
// retirement time plus the longest lease lifetime plus the clock-skew
// allowance. Then the source destroys it.
package keys
