package grpcapi

import (
	"context"
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
