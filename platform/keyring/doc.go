// Package keyring holds a service's token-signing keys: where they come
// from ([Source]: a key file for development, [File]; an interface a KMS
// can implement, so no private key sits in a database column), which one
// signs new tokens, and which public keys are published ([Ring], [KeySet],
// the JWKS).
//
// The lease service signs leases with one ring and admission signs ALLOW
// receipts with another; both rotate on a schedule and on demand. A
// retired key stays published until every token it signed has expired:
// its retirement time plus the longest token lifetime plus the clock-skew
// allowance (plus the key-check interval other replicas may still sign
// in). Then the source destroys it.
package keyring
