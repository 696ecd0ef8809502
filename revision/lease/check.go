package lease

import "time"

// Defaults of [Input].
const (
	// DefaultSkew is the clock-skew allowance on `exp` and on a proof's
	// `iat` in the future.
	DefaultSkew = 5 * time.Second
	// DefaultProofWindow is how old a proof may be.
	DefaultProofWindow = 30 * time.Second
	// MaxSkew bounds [Input.Skew]: an allowance this large would make the
	// 60 s lifetime meaningless.
	MaxSkew = 30 * time.Second
)

// Input is what [Check] decides on.
type Input struct {
	// Token is the lease (compact JWS).
	Token string
	// Proof is the holder proof (compact JWS).
	Proof string
	// Audience is the executor's own audience.
	Audience string
	// Tool is the tool id the executor is about to run.
	Tool string
	// ArgumentDigest is the digest of the arguments the executor is about
	// to run with ([canonical] JSON, `sha256:<hex>`).
	ArgumentDigest string
	// Keys are the lease service's public keys.
	Keys KeySet
	// Now is the time of the check.
	Now time.Time
	// Skew is the clock-skew allowance; 0 means [DefaultSkew]; capped at
	// [MaxSkew].
	Skew time.Duration
	// ProofWindow is how old a proof may be; 0 means [DefaultProofWindow].
	ProofWindow time.Duration
	// Headers remembers the headers of leases and proofs that verified,
	// so a verifier that sees many skips parsing them again; nil parses
	// every header.
	Headers *HeaderCache
}

// Check applies the stateless rules to a lease and its proof. It returns
// the lease's claims once its signature verified (nil before), and the
// refusal, nil when the lease is accepted. When several causes hold, the
// first of this order is the answer:
//
//  1. [BadSignature]: no token, too long, not an EdDSA compact JWS with
//     `typ` [TokenType] and a `kid`;
//  2. [UnknownKey]: the `kid` is not in Keys;
//  3. [BadSignature]: the signature does not verify, or the claims are
//     malformed (a required claim missing, a lifetime over [MaxTTL]) or
//     issued more than Skew in the future;
//  4. [Expired]: Now is at or past `exp` + Skew;
//  5. [WrongAudience]: `aud` is not Audience;
//  6. [OtherTool]: `tool` is not Tool;
//  7. [ArgumentsMismatch]: `arg` is not ArgumentDigest;
//  8. [BadProof]: no proof, too long, not an EdDSA compact JWS with `typ`
//     [ProofType] and an Ed25519 public `jwk`, or its signature does not
//     verify with that key;
//  9. [ProofOtherHolder]: the proof key's thumbprint is not `cnf.jkt`;
//  10. [ProofOtherLease]: the proof's `jti` is not the lease's;
//  11. [ProofWrongAudience]: the proof's `aud` is not the lease's;
//  12. [ProofOtherArguments]: the proof's `arg` is not the lease's;
//  13. [ProofStale]: the proof's `iat` is before Now − ProofWindow or after
//     Now + Skew.
//
// Single use, revocation, frozen issuance and freshness are not stateless;
// the lease service's Verify checks them after these.
func Check(in Input) (*Claims, *Refusal) {
	skew := in.Skew
	if skew <= 0 {
		skew = DefaultSkew
	}
	skew = min(skew, MaxSkew)
	window := in.ProofWindow
	if window <= 0 {
		window = DefaultProofWindow
	}
	c, r := parseToken(in.Token, in.Keys, in.Headers)
	if r != nil {
		return nil, r
	}
	if c.IssuedAt.After(in.Now.Add(skew)) {
		return &c, refuse(BadSignature, "the lease is issued in the future")
	}
	if !in.Now.Before(c.ExpiresAt.Add(skew)) {
		return &c, refuse(Expired, "the lease expired at %s", c.ExpiresAt.Format(time.RFC3339))
	}
	if c.Audience != in.Audience {
		return &c, refuse(WrongAudience, "the lease is for another executor")
	}
	if c.Tool != in.Tool {
		return &c, refuse(OtherTool, "the lease is for another tool")
	}
	if c.ArgumentDigest != in.ArgumentDigest {
		return &c, refuse(ArgumentsMismatch, "the call's arguments are not the ones the lease was issued for")
	}
	p, thumb, r := parseProof(in.Proof, in.Headers)
	if r != nil {
		return &c, r
	}
	switch {
	case thumb != c.HolderThumbprint:
		return &c, refuse(ProofOtherHolder, "the holder proof is signed by a key other than the lease's holder key")
	case p.LeaseID != c.ID:
		return &c, refuse(ProofOtherLease, "the holder proof was made for another lease")
	case p.Audience != c.Audience:
		return &c, refuse(ProofWrongAudience, "the holder proof was made for another executor")
	case p.ArgumentDigest != c.ArgumentDigest:
		return &c, refuse(ProofOtherArguments, "the holder proof was made for other arguments")
	}
	iat := time.Unix(p.IssuedAt, 0)
	if iat.Before(in.Now.Add(-window)) || iat.After(in.Now.Add(skew)) {
		return &c, refuse(ProofStale, "the holder proof's iat is outside the accepted window of %s", window)
	}
	return &c, nil
}
