package grpcapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/keyring"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/platform/signedreceipt"
)

// TestAnAllowIsSignedAndADenyIsNot: an ALLOW carries a signed receipt that
// verifies under the published JWKS (fetched without a credential) and
// says exactly what the receipt says; a DENY carries none.
func TestAnAllowIsSignedAndADenyIsNot(t *testing.T) {
	ring, err := keyring.NewRing(context.Background(), &keyring.Memory{}, keyring.Options{Lifetime: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := newRigWith(t, world(), nil, func(o *Options) { o.Signing = &Signing{Ring: ring, MaxLifetime: 5 * time.Second} })
	anon := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, r.addr, ""))
	keys, err := anon.GetSigningKeys(context.Background(), &admissionv1.GetSigningKeysRequest{})
	if err != nil {
		t.Fatalf("GetSigningKeys without a credential: %v", err)
	}
	ks, err := keyring.ParseKeySet(keys.GetJwks())
	if err != nil || ks.Len() != 1 {
		t.Fatalf("JWKS: %v, %d keys", err, ks.Len())
	}
	resp := check(t, r.client(t, "alice", "demo-a"), okReq())
	if resp.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
		t.Fatalf("decision %v (%s)", resp.GetReason(), resp.GetDetail())
	}
	d, err := signedreceipt.Parse(resp.GetSignedReceipt(), ks)
	if err != nil {
		t.Fatalf("the signed receipt does not verify: %v", err)
	}
	want := proto.Clone(resp.GetReceipt()).(*admissionv1.Receipt)
	want.DecidedAt = d.Receipt.GetDecidedAt() // signed to the millisecond
	if !proto.Equal(d.Receipt, want) {
		t.Fatalf("signed %v\nreceipt %v", d.Receipt, want)
	}
	if vu := resp.GetValidUntil().AsTime(); d.ValidUntil.After(vu) || vu.Sub(d.ValidUntil) >= time.Second {
		t.Fatalf("signed exp %v, valid_until %v", d.ValidUntil, vu)
	}
	deny := okReq()
	deny.DescriptorDigest = digB
	if resp := check(t, r.client(t, "alice", "demo-a"), deny); resp.GetDecision() != admissionv1.Decision_DECISION_DENY || resp.GetSignedReceipt() != "" {
		t.Fatalf("a DENY (%v) carries a signed receipt %q", resp.GetReason(), resp.GetSignedReceipt())
	}
}

// TestAfterARotationAllowsAreSignedWithTheNewKey: the signer kept between
// Checks follows the ring's current key.
func TestAfterARotationAllowsAreSignedWithTheNewKey(t *testing.T) {
	ctx := context.Background()
	ring, err := keyring.NewRing(ctx, &keyring.Memory{}, keyring.Options{Lifetime: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := newRigWith(t, world(), nil, func(o *Options) { o.Signing = &Signing{Ring: ring, MaxLifetime: 5 * time.Second} })
	c := r.client(t, "alice", "demo-a")
	kidOf := func() string {
		t.Helper()
		resp := check(t, c, okReq())
		doc, _, err := ring.JWKS()
		if err != nil {
			t.Fatal(err)
		}
		ks, err := keyring.ParseKeySet(doc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := signedreceipt.Parse(resp.GetSignedReceipt(), ks); err != nil {
			t.Fatalf("the signed receipt does not verify: %v", err)
		}
		h, err := base64.RawURLEncoding.DecodeString(strings.Split(resp.GetSignedReceipt(), ".")[0])
		if err != nil {
			t.Fatal(err)
		}
		var head struct{ Kid string }
		if err := json.Unmarshal(h, &head); err != nil {
			t.Fatal(err)
		}
		return head.Kid
	}
	before, _ := ring.Current()
	if got := kidOf(); got != before.ID {
		t.Fatalf("signed with %q, the current key is %q", got, before.ID)
	}
	rot, err := ring.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rot.Current.ID == before.ID {
		t.Fatal("the rotation kept the key")
	}
	if got := kidOf(); got != rot.Current.ID {
		t.Fatalf("after the rotation signed with %q, want the new key %q", got, rot.Current.ID)
	}
}
