package signedreceipt

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/platform/keyring"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 123_000_000, time.UTC)

func newKey(t testing.TB) keyring.Key {
	t.Helper()
	k, err := (&keyring.Memory{}).Create(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func allow() *admissionv1.Receipt {
	return &admissionv1.Receipt{
		ReceiptId: "r-1", Decision: admissionv1.Decision_DECISION_ALLOW, Reason: catalogv1.DecisionReason_DECISION_REASON_ALLOW,
		TenantId: "acme", Subject: "alice", ToolId: "srv.tool", ServerId: "srv", AudienceClass: "acme/eng",
		Generation: 3, DescriptorDigest: "sha256:dd", PolicyEpoch: 7, ArgumentDigest: "sha256:aa",
		Mode: admissionv1.Mode_MODE_USER_CONFIRMED, RunId: "run", DecidedAt: timestamppb.New(t0), Replica: "h:1",
		EffectClass: catalogv1.EffectClass_EFFECT_CLASS_WRITE, Confirmer: "gateway", ConfirmedAt: timestamppb.New(t0),
		ShownDigest: "sha256:ss",
	}
}

func keySet(ks ...keyring.Key) keyring.KeySet {
	m := map[string]ed25519.PublicKey{}
	for _, k := range ks {
		m[k.ID] = k.Public
	}
	return keyring.NewKeySet(m)
}

func TestASignedReceiptCarriesEveryDecisionField(t *testing.T) {
	k := newKey(t)
	tok, err := Sign(k, allow(), t0.Add(4500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(tok, keySet(k))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(d.Receipt, allow()) {
		t.Fatalf("parsed %v\nwant   %v", d.Receipt, allow())
	}
	if want := time.Unix(t0.Add(4500*time.Millisecond).Unix(), 0); !d.ValidUntil.Equal(want) {
		t.Fatalf("valid until %v, want %v (rounded down, never later than admission said)", d.ValidUntil, want)
	}
}

func TestOnlyAnAllowIsSigned(t *testing.T) {
	r := allow()
	r.Decision = admissionv1.Decision_DECISION_DENY
	if _, err := Sign(newKey(t), r, t0.Add(time.Second)); err == nil {
		t.Fatal("a DENY was signed")
	}
}

func TestParseRefusesWhatAdmissionDidNotSign(t *testing.T) {
	k, other := newKey(t), newKey(t)
	tok, err := Sign(k, allow(), t0.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	otherTok, err := Sign(other, allow(), t0.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The same kid on another key: the signature must decide, not the kid.
	impostor := keyring.Key{ID: k.ID, Public: other.Public, Signer: other.Signer}
	impostorTok, err := Sign(impostor, allow(), t0.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r2 := allow()
	r2.TenantId = "globex"
	tok2, err := Sign(k, r2, t0.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	altered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"sub":"alice"`, `"sub":"mallory"`, 1))) + "." + parts[2]
	noneHeader := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"` + k.ID + `","typ":"receipt+jwt"}`))
	for name, c := range map[string]struct {
		tok  string
		want error
	}{
		"signed by another key":        {otherTok, ErrUnknownKey},
		"another key under our kid":    {impostorTok, ErrBadSignature},
		"altered subject":              {altered, ErrBadSignature},
		"alg none":                     {noneHeader + "." + parts[1] + ".", ErrBadSignature},
		"empty":                        {"", ErrBadSignature},
		"a megabyte":                   {strings.Repeat("a", 1<<20), ErrBadSignature},
		"not a JWS":                    {"a.b", ErrBadSignature},
		"signature of another payload": {parts[0] + "." + strings.Split(tok2, ".")[1] + "." + parts[2], ErrBadSignature},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(c.tok, keySet(k))
			if !errors.Is(err, c.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse = %v, want %v", err, c.want)
			}
		})
	}
}

func TestALeaseTypedTokenIsNotAReceipt(t *testing.T) {
	k := newKey(t)
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","kid":"` + k.ID + `","typ":"lease+jwt"}`))
	p := base64.RawURLEncoding.EncodeToString([]byte(`{"jti":"r-1","sub":"alice","tenant":"acme","exp":1}`))
	sig := ed25519.Sign(k.Signer.(ed25519.PrivateKey), []byte(h+"."+p))
	tok := h + "." + p + "." + base64.RawURLEncoding.EncodeToString(sig)
	if _, err := Parse(tok, keySet(k)); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a token of another typ = %v", err)
	}
}
