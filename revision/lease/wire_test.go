package lease

import (
	"encoding/json"
	"testing"
)

// The hand-written header and claims are byte for byte what json.Marshal
// writes of them: tokens signed before and after read the same, to any
// verifier.
func TestSignWritesWhatJSONMarshalWrites(t *testing.T) {
	_, holder := newHolder(t)
	plain := sampleClaims(holder)
	odd := plain
	odd.Issuer, odd.Tenant, odd.AudienceClass, odd.Receipt = "https://lease.example/", "tenant-<a>&\"b\"", "c\\d", "r\u2028é\x00\xff"
	odd.Subject, odd.Generation, odd.PolicyEpoch = "alice\nbob", -1, 1<<62
	for name, c := range map[string]Claims{"plain": plain, "odd": odd} {
		want, err := json.Marshal(c.wire())
		if err != nil {
			t.Fatal(err)
		}
		if got := appendWire(nil, c.wire()); string(got) != string(want) {
			t.Fatalf("%s claims:\n got  %s\n want %s", name, got, want)
		}
	}
	for _, kid := range []string{"k1", "key <2>", "k\"3\\", "ключ"} {
		want, err := json.Marshal(tokenHeader{Alg: "EdDSA", Kid: kid, Typ: TokenType})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendHeader(nil, kid); string(got) != string(want) {
			t.Fatalf("header of %q:\n got  %s\n want %s", kid, got, want)
		}
	}
}

// FuzzAppendWire: any strings and numbers, written by hand as json.Marshal
// writes them.
func FuzzAppendWire(f *testing.F) {
	f.Add("l1", "", "alice", "t", "tool", "srv", "", "sha256:x", int64(1), int64(2), "sha256:y", "exec", "jkt", "", int64(3), int64(4))
	f.Add("\x00", "<", ">", "&", "\u2028", "\u2029", "\xff", "é", int64(-1), int64(-9223372036854775808), "\"", "\\", "\t", "\x7f", int64(0), int64(9223372036854775807))
	f.Fuzz(func(t *testing.T, id, iss, sub, tenant, tool, srv, acl, dd string, gen, epoch int64, arg, aud, jkt, rcpt string, iat, exp int64) {
		w := wireClaims{ID: id, Issuer: iss, Subject: sub, Tenant: tenant, Tool: tool, Server: srv, AudienceClass: acl,
			DescriptorDigest: dd, Generation: gen, PolicyEpoch: epoch, ArgumentDigest: arg, Audience: aud,
			Confirmation: confirmation{JKT: jkt}, Receipt: rcpt, IssuedAt: iat, ExpiresAt: exp}
		want, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendWire(nil, w); string(got) != string(want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		wantH, _ := json.Marshal(tokenHeader{Alg: "EdDSA", Kid: id, Typ: TokenType})
		if got := appendHeader(nil, id); string(got) != string(wantH) {
			t.Fatalf("header got  %s\nwant %s", got, wantH)
		}
	})
}
