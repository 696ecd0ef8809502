// Package lease is the wire format of toolcrib execution leases (DESIGN
// §7a, I9), written once for both sides: the lease service that signs them
// and every executor that accepts them (through [executor] or on its own).
//
// A lease is a compact JWS (header `typ` [TokenType], `alg` EdDSA only, `kid`
// naming the lease service's signing key) whose [Claims] bind principal,
// tenant, tool, server, descriptor digest, generation, policy epoch,
// argument digest, the executor audience and, in `cnf.jkt`, the RFC 7638
// thumbprint of the holder's Ed25519 public key. It lives at most [MaxTTL].
//
// A lease alone is not enough to run a call: the executor also needs a
// holder proof ([NewProof]), a compact JWS (`typ` [ProofType]) signed by the
// holder key, carrying that public key in its `jwk` header, over the lease
// id, the argument digest, the executor audience and the time — the way
// RFC 9449 (DPoP) makes an OAuth token non-transferable.
//
// [Check] holds the verification rules as a pure function (no I/O, clock
// passed in): it returns the first [Failure] in a documented order, one per
// cause. The stateful checks — single use, revocation, frozen issuance, the
// freshness of epoch and generation — are the lease service's Verify.
//
// [executor]: https://pkg.go.dev/github.com/toolcrib/toolcrib/revision/lease/executor
package lease
