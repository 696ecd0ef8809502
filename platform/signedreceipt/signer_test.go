package signedreceipt

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/platform/keyring"
)

// kmsSigner hides the private key's type, as a KMS-backed source does.
type kmsSigner struct{ crypto.Signer }

func (k kmsSigner) Sign(r io.Reader, msg []byte, o crypto.SignerOpts) ([]byte, error) {
	return k.Signer.Sign(r, msg, o)
}

// sameAsSign checks that s signs r exactly as Sign does and that Parse
// gives back every signed field.
func sameAsSign(t *testing.T, k keyring.Key, s *Signer, r *admissionv1.Receipt, until time.Time) {
	t.Helper()
	want, err := Sign(k, r, until)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	got, err := s.Sign(r, until)
	if err != nil {
		t.Fatalf("Signer.Sign: %v", err)
	}
	if got != want {
		t.Fatalf("Signer.Sign = %s\nSign        = %s", got, want)
	}
	d, err := Parse(got, keySet(k))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	// Parse reads decided_at to the millisecond and sets confirmed_at from
	// it when there is a confirmer.
	exp := proto.Clone(r).(*admissionv1.Receipt)
	exp.DecidedAt = timestamppb.New(r.GetDecidedAt().AsTime().Truncate(time.Millisecond))
	exp.ConfirmedAt = nil
	if r.GetConfirmer() != "" {
		exp.ConfirmedAt = exp.DecidedAt
	}
	if !proto.Equal(d.Receipt, exp) {
		t.Fatalf("parsed %v\nwant   %v", d.Receipt, exp)
	}
}

func TestSignerSignsWhatSignSigns(t *testing.T) {
	k := newKey(t)
	s, err := NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	bare := &admissionv1.Receipt{ReceiptId: "r-2", Decision: admissionv1.Decision_DECISION_ALLOW,
		TenantId: "acme", Subject: "bob", DecidedAt: timestamppb.New(t0)}
	hostile := allow()
	hostile.Subject = "a\"b\\c<d>e&f\ng\x01h\u2028i\u2029j"
	hostile.ToolId = "srv.tööl"
	hostile.Replica = "\b\f\t\r\x7f"
	negative := allow()
	negative.Generation, negative.PolicyEpoch = -1, -9_223_372_036_854_775_808
	negative.DecidedAt = timestamppb.New(time.Date(1960, 1, 1, 0, 0, 0, 999_999_999, time.UTC))
	for name, r := range map[string]*admissionv1.Receipt{
		"every field":               allow(),
		"only the required fields":  bare,
		"strings json escapes":      hostile,
		"negative numbers and time": negative,
	} {
		t.Run(name, func(t *testing.T) {
			sameAsSign(t, k, s, r, t0.Add(4500*time.Millisecond))
		})
	}
	// Invalid UTF-8 does not survive JSON (both write U+FFFD): the
	// tokens must still be the same.
	bad := allow()
	bad.RunId = "bad utf-8 \xff\xfe"
	want, err := Sign(k, bad, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Sign(bad, t0); err != nil || got != want {
		t.Fatalf("invalid UTF-8: Signer.Sign = %s, %v\nSign        = %s", got, err, want)
	}
}

func TestSignerWithAKeyOutsideTheProcess(t *testing.T) {
	k := newKey(t)
	kms := keyring.Key{ID: k.ID, Public: k.Public, Signer: kmsSigner{k.Signer}}
	s, err := NewSigner(kms)
	if err != nil {
		t.Fatal(err)
	}
	if s.priv != nil {
		t.Fatal("a signer that is not an ed25519.PrivateKey was read as one")
	}
	sameAsSign(t, k, s, allow(), t0.Add(time.Second))
}

func TestSignerRefusesWhatSignRefuses(t *testing.T) {
	k := newKey(t)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]keyring.Key{
		"no key id":     {Public: k.Public, Signer: k.Signer},
		"no signer":     {ID: k.ID, Public: k.Public},
		"not Ed25519":   {ID: "ec", Signer: ec},
		"short ed25519": {ID: "short", Signer: kmsSigner{k.Signer}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewSigner(key)
			if name == "short ed25519" { // a KMS signer with an Ed25519 public key is fine
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("NewSigner accepted it")
			}
		})
	}
	s, err := NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	deny := allow()
	deny.Decision, deny.Reason = admissionv1.Decision_DECISION_DENY, catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN
	noID := allow()
	noID.ReceiptId = ""
	noTenant := allow()
	noTenant.TenantId = ""
	noSubject := allow()
	noSubject.Subject = ""
	for name, r := range map[string]*admissionv1.Receipt{"a DENY": deny, "no id": noID, "no tenant": noTenant, "no subject": noSubject} {
		t.Run(name, func(t *testing.T) {
			if tok, err := s.Sign(r, t0.Add(time.Second)); err == nil {
				t.Fatalf("signed %s", tok)
			}
		})
	}
}

// FuzzSignerSignsWhatSignSigns: for any field values the hand-written
// encoding is json.Marshal's.
func FuzzSignerSignsWhatSignSigns(f *testing.F) {
	f.Add("r-1", "alice", "acme", "srv.tool", "acme/eng", "run", "gateway", int64(3), int64(7), int32(2), int64(0))
	f.Add("a\"<>&\\", "\u2028\xff", "t\x00", "", "", "", "", int64(-1), int64(0), int32(-5), int64(-62135596800))
	k := newKey(f)
	s, err := NewSigner(k)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, sub, tenant, tool, class, run, confirmer string, gen, epoch int64, effect int32, at int64) {
		if id == "" || sub == "" || tenant == "" {
			return // refused by both
		}
		r := allow()
		r.ReceiptId, r.Subject, r.TenantId, r.ToolId, r.AudienceClass, r.RunId, r.Confirmer = id, sub, tenant, tool, class, run, confirmer
		r.Generation, r.PolicyEpoch, r.EffectClass = gen, epoch, catalogv1.EffectClass(effect)
		r.DecidedAt = timestamppb.New(time.Unix(at%(1<<40), 0))
		want, err := Sign(k, r, t0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Sign(r, t0)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("Signer.Sign = %s\nSign        = %s", got, want)
		}
	})
}

// BenchmarkSigner is Sign's work through a Signer (admission's per-ALLOW
// path); compare with BenchmarkSign and BenchmarkEd25519 in one run.
func BenchmarkSigner(b *testing.B) {
	k, r := newKey(b), allow()
	s, err := NewSigner(k)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sign(r, t0.Add(5*time.Second)); err != nil {
			b.Fatal(err)
		}
	}
}
