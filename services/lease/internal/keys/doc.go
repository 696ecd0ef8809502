// Package keys holds the lease service's signing keys: where they come from
// ([Source]: a key file for development, [File]; an interface a KMS can
// implement, so no private key sits in a database column), which one signs
// new leases, and which public keys are published ([Ring]).
//
// Keys rotate on a schedule and on demand. A retired key stays published —
// in the JWKS of GetSigningKeys and in the key set Verify uses — until every
// lease it signed has expired: its retirement time plus the longest lease
// lifetime plus the clock-skew allowance. Then the source destroys it.
package keys
