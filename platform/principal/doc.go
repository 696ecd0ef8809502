// Package principal verifies the bearer tokens callers present and carries
// the verified principal through a request's context.
//
// A principal is only ever built from a token whose signature, expiry,
// issuer and audience were checked against the configured keys (a JWKS from
// the operator's identity provider). Nothing in a request body can name or
// change it. For development and tests, [Signer] mints tokens from a local
// Ed25519 key, and [EnsureDevKeys] creates that key and its JWKS.
package principal
