package lease

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// scene is one valid lease and proof; each case breaks one thing.
type scene struct {
	key     SigningKey
	keys    KeySet
	holder  ed25519.PrivateKey
	claims  Claims
	proof   ProofClaims
	in      Input
	signErr error
}

func newScene(t *testing.T) *scene {
	key, pub := newSigningKey(t, "k1")
	priv, holder := newHolder(t)
	c := sampleClaims(holder)
	return &scene{
		key: key, keys: NewKeySet(map[string]ed25519.PublicKey{"k1": pub}), holder: priv, claims: c,
		proof: ProofClaims{LeaseID: c.ID, ArgumentDigest: c.ArgumentDigest, Audience: c.Audience, IssuedAt: t0.Add(2 * time.Second).Unix()},
		in:    Input{Audience: c.Audience, Tool: c.Tool, ArgumentDigest: c.ArgumentDigest, Now: t0.Add(2 * time.Second)},
	}
}

func (s *scene) input(t *testing.T) Input {
	t.Helper()
	in := s.in
	in.Keys = s.keys
	if in.Token == "" {
		tok, err := Sign(s.key, s.claims)
		if err != nil {
			t.Fatal(err)
		}
		in.Token = tok
	}
	if in.Proof == "" {
		p, err := SignProof(s.holder, s.proof)
		if err != nil {
			t.Fatal(err)
		}
		in.Proof = p
	}
	return in
}

func TestCheckAcceptsAValidLeaseAndProof(t *testing.T) {
	s := newScene(t)
	c, r := Check(s.input(t))
	if r != nil || c == nil || *c != s.claims {
		t.Fatalf("Check = %+v, %v", c, r)
	}
	// NewProof makes the same proof as the scene's.
	p, err := NewProof(s.holder, s.claims, s.in.Now)
	if err != nil {
		t.Fatal(err)
	}
	in := s.input(t)
	in.Proof = p
	if _, r := Check(in); r != nil {
		t.Fatalf("NewProof's proof refused: %v", r)
	}
}

func TestCheckRefusesOneFailurePerCause(t *testing.T) {
	other, _ := newHolder(t)
	_, otherPub := newSigningKey(t, "k1")
	cases := []struct {
		name string
		edit func(t *testing.T, s *scene)
		want Failure
		// claims says whether the refusal carries the lease's claims.
		claims bool
	}{
		{"another key's signature", func(t *testing.T, s *scene) {
			s.keys = NewKeySet(map[string]ed25519.PublicKey{"k1": otherPub})
		}, BadSignature, false},
		{"a key the service does not publish", func(t *testing.T, s *scene) { s.key.ID = "k2" }, UnknownKey, false},
		{"issued in the future", func(t *testing.T, s *scene) {
			s.claims.IssuedAt, s.claims.ExpiresAt = t0.Add(time.Minute), t0.Add(90*time.Second)
		}, BadSignature, true},
		{"expired", func(t *testing.T, s *scene) { s.in.Now = t0.Add(35 * time.Second) }, Expired, true},
		{"another audience", func(t *testing.T, s *scene) { s.in.Audience = "executor.billing" }, WrongAudience, true},
		{"another tool", func(t *testing.T, s *scene) { s.in.Tool = "inventory.delete_all" }, OtherTool, true},
		{"another audience and another tool", func(t *testing.T, s *scene) { s.in.Audience = "x"; s.in.Tool = "y" }, WrongAudience, true},
		{"another tool and other arguments", func(t *testing.T, s *scene) { s.in.Tool = "x"; s.in.ArgumentDigest = "y" }, OtherTool, true},
		{"other arguments", func(t *testing.T, s *scene) { s.in.ArgumentDigest = "sha256:" + strings.Repeat("c", 64) }, ArgumentsMismatch, true},
		{"no proof", func(t *testing.T, s *scene) { s.in.Proof = "-" }, BadProof, true},
		{"proof with a forged signature", func(t *testing.T, s *scene) {
			p, _ := SignProof(s.holder, s.proof)
			parts := strings.Split(p, ".")
			sig := []byte(parts[2])
			sig[3] ^= 1
			s.in.Proof = parts[0] + "." + parts[1] + "." + string(sig)
		}, BadProof, true},
		{"proof without jwk", func(t *testing.T, s *scene) {
			signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: s.holder},
				(&jose.SignerOptions{}).WithType(ProofType))
			jws, _ := signer.Sign([]byte(`{"jti":"lease-1","iat":1}`))
			s.in.Proof, _ = jws.CompactSerialize()
		}, BadProof, true},
		{"proof that is a lease", func(t *testing.T, s *scene) { s.in.Proof, _ = Sign(s.key, s.claims) }, BadProof, true},
		{"proof a megabyte long", func(t *testing.T, s *scene) { s.in.Proof = strings.Repeat("x", 1<<20) }, BadProof, true},
		{"proof from another holder", func(t *testing.T, s *scene) { s.holder = other }, ProofOtherHolder, true},
		{"proof reused for another lease", func(t *testing.T, s *scene) { s.proof.LeaseID = "lease-0" }, ProofOtherLease, true},
		{"proof for another executor", func(t *testing.T, s *scene) { s.proof.Audience = "executor.billing" }, ProofWrongAudience, true},
		{"proof for other arguments", func(t *testing.T, s *scene) {
			s.proof.ArgumentDigest = "sha256:" + strings.Repeat("c", 64)
		}, ProofOtherArguments, true},
		{"stale proof", func(t *testing.T, s *scene) { s.proof.IssuedAt = s.in.Now.Add(-31 * time.Second).Unix() }, ProofStale, true},
		{"proof from the future", func(t *testing.T, s *scene) { s.proof.IssuedAt = s.in.Now.Add(6 * time.Second).Unix() }, ProofStale, true},
		// Adjacent pairs in the documented order: the earlier cause wins.
		{"unknown key and expired", func(t *testing.T, s *scene) { s.key.ID = "k2"; s.in.Now = t0.Add(time.Hour) }, UnknownKey, false},
		{"expired and another audience", func(t *testing.T, s *scene) {
			s.in.Now = t0.Add(time.Hour)
			s.in.Audience = "x"
		}, Expired, true},
		{"another audience and other arguments", func(t *testing.T, s *scene) {
			s.in.Audience = "x"
			s.in.ArgumentDigest = "y"
		}, WrongAudience, true},
		{"other arguments and no proof", func(t *testing.T, s *scene) { s.in.ArgumentDigest = "y"; s.in.Proof = "-" }, ArgumentsMismatch, true},
		{"bad proof and another holder", func(t *testing.T, s *scene) { s.holder = other; s.in.Proof = "-" }, BadProof, true},
		{"another holder and another lease", func(t *testing.T, s *scene) { s.holder = other; s.proof.LeaseID = "x" }, ProofOtherHolder, true},
		{"another lease and another audience", func(t *testing.T, s *scene) { s.proof.LeaseID = "x"; s.proof.Audience = "x" }, ProofOtherLease, true},
		{"proof audience and arguments", func(t *testing.T, s *scene) { s.proof.Audience = "x"; s.proof.ArgumentDigest = "x" }, ProofWrongAudience, true},
		{"proof arguments and stale", func(t *testing.T, s *scene) { s.proof.ArgumentDigest = "x"; s.proof.IssuedAt = 1 }, ProofOtherArguments, true},
	}
	for _, tc := range cases {
		for _, warm := range []bool{false, true} {
			name := tc.name
			if warm {
				name += " (headers remembered)"
			}
			t.Run(name, func(t *testing.T) {
				s := newScene(t)
				tc.edit(t, s)
				in := s.input(t)
				if in.Proof == "-" {
					in.Proof = ""
				}
				if warm {
					in.Headers = warmHeaders(t, s)
				}
				c, r := Check(in)
				if r == nil {
					t.Fatalf("Check accepted it")
				}
				if r.Failure != tc.want {
					t.Fatalf("Check = %s (%s), want %s", r.Failure, r.Detail, tc.want)
				}
				if (c != nil) != tc.claims {
					t.Fatalf("claims returned = %v, want %v", c != nil, tc.claims)
				}
			})
		}
	}
}

// warmHeaders returns a header cache that remembers the headers of a
// genuine lease signed with s's signing key (under its id) and of a genuine
// proof by s's holder, so a forgery that reuses them takes the cached path.
func warmHeaders(t *testing.T, s *scene) *HeaderCache {
	t.Helper()
	hc := &HeaderCache{}
	pub, _ := s.key.Signer.Public().(ed25519.PublicKey)
	hpub, _ := s.holder.Public().(ed25519.PublicKey)
	c := sampleClaims(HolderKey{Public: hpub, Thumbprint: Thumbprint(hpub)})
	tok, err := Sign(s.key, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, r := parseToken(tok, NewKeySet(map[string]ed25519.PublicKey{s.key.ID: pub}), hc); r != nil {
		t.Fatalf("the genuine lease was refused: %v", r)
	}
	proof, err := NewProof(s.holder, c, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, r := parseProof(proof, hc); r != nil {
		t.Fatalf("the genuine proof was refused: %v", r)
	}
	if hc.tokens.Len() != 1 || hc.proofs.Len() != 1 {
		t.Fatalf("headers remembered: %d leases, %d proofs; want 1 and 1", hc.tokens.Len(), hc.proofs.Len())
	}
	return hc
}

func TestCheckClockSkewAllowance(t *testing.T) {
	cases := []struct {
		name string
		now  time.Duration // after t0
		skew time.Duration
		want Failure
	}{
		{"just before exp", 29 * time.Second, 0, Accepted},
		{"inside the default skew past exp", 34 * time.Second, 0, Accepted},
		{"at exp plus the default skew", 35 * time.Second, 0, Expired},
		{"inside a configured 1s skew", 30*time.Second + 500*time.Millisecond, time.Second, Accepted},
		{"past a configured 1s skew", 31 * time.Second, time.Second, Expired},
		{"a skew over MaxSkew is capped", 61 * time.Second, time.Hour, Expired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScene(t)
			s.in.Now = t0.Add(tc.now)
			s.in.Skew = tc.skew
			s.in.ProofWindow = time.Hour
			s.proof.IssuedAt = s.in.Now.Unix()
			_, r := Check(s.input(t))
			got := Accepted
			if r != nil {
				got = r.Failure
			}
			if got != tc.want {
				t.Fatalf("Check = %v, want %s", r, tc.want)
			}
		})
	}
}

func TestCheckProofWindow(t *testing.T) {
	s := newScene(t)
	s.in.ProofWindow = 10 * time.Second
	s.proof.IssuedAt = s.in.Now.Add(-10 * time.Second).Unix()
	if _, r := Check(s.input(t)); r != nil {
		t.Fatalf("a proof exactly at the window edge was refused: %v", r)
	}
	s = newScene(t)
	s.in.ProofWindow = 10 * time.Second
	s.proof.IssuedAt = s.in.Now.Add(-11 * time.Second).Unix()
	if _, r := Check(s.input(t)); r == nil || r.Failure != ProofStale {
		t.Fatalf("Check = %v, want PROOF_STALE", r)
	}
}

func TestFailureNamesAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Failures() {
		n := f.String()
		if seen[n] || strings.HasPrefix(n, "Failure(") {
			t.Fatalf("failure %d has name %q", f, n)
		}
		seen[n] = true
	}
	if len(Failures()) != 17 {
		t.Fatalf("%d failures, want 17", len(Failures()))
	}
}
