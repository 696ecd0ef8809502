package lease_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/internal/keys"

	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
)

func kidOf(t *testing.T, token string) string {
	t.Helper()
	ks := strings.Split(token, ".")
	h, err := decodeSegment(ks[0])
	if err != nil {
		t.Fatal(err)
	}
	return h["kid"].(string)
}

// TestRotationKeepsOldLeasesVerifying: another process rotates the shared
// key file; the running service picks the new key up on its next
// maintenance, signs new leases with it, still publishes the old key and
// still verifies a lease the old key signed.
func TestRotationKeepsOldLeasesVerifying(t *testing.T) {
	s := newSuite(t, 1)
	h := newHolder(t)
	old := s.issue(t, h)
	oldKid := kidOf(t, old.GetToken())

	ring, err := keys.NewRing(ctxT(t), keys.NewFile(s.cfg.KeyFile), keys.Options{Skew: s.cfg.Skew})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Rotate(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	cur, _ := ring.Current()
	deadline := time.Now().Add(10 * time.Second)
	var fresh *leasev1.IssueResponse
	for {
		fresh = s.issue(t, h)
		if kidOf(t, fresh.GetToken()) == cur.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the service never picked up the rotated key")
		}
		time.Sleep(200 * time.Millisecond)
	}
	resp, err := s.alice(t).GetSigningKeys(ctxT(t), &leasev1.GetSigningKeysRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ks, _ := lease.ParseKeySet(resp.GetJwks())
	if _, ok := ks.Key(oldKid); !ok || resp.GetCurrentKeyId() != cur.ID {
		t.Fatalf("JWKS after rotation: old key published %v, current %s want %s", ok, resp.GetCurrentKeyId(), cur.ID)
	}
	for name, r := range map[string]*leasev1.IssueResponse{"old key": old, "new key": fresh} {
		v, err := s.alice(t).Verify(ctxT(t), verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims())))
		if err != nil || !v.GetValid() {
			t.Fatalf("lease signed with the %s: %v %s", name, err, v.GetFailure())
		}
	}
}

// TestRotateSigningKeyOnDemand: RotateSigningKey (admins only) makes a new
// key current at once; a lease the old key signed before the rotation
// still verifies, GetSigningKeys still publishes the old key, and the
// answer says it stays published until the longest lease the old key could
// have signed has expired (rotation + 60 s + skew + the key-check interval
// another replica may still sign with it for), which is after the old
// lease's expiry. A tenant user and a toolcrib service may not rotate.
func TestRotateSigningKeyOnDemand(t *testing.T) {
	s := newSuite(t, 1)
	h := newHolder(t)
	old := s.issue(t, h)
	oldKid := kidOf(t, old.GetToken())

	for name, c := range map[string]leasev1.LeaseServiceClient{
		"a tenant user": s.alice(t), "a toolcrib service": s.client(t, 0, s.auth.Service(t)),
	} {
		if _, err := c.RotateSigningKey(ctxT(t), &leasev1.RotateSigningKeyRequest{}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s rotating: %v, want PermissionDenied", name, err)
		}
	}
	if _, err := s.admin(t).RotateSigningKey(ctxT(t), &leasev1.RotateSigningKeyRequest{Reason: "bad\x00reason"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a reason with a control character: %v", err)
	}
	_, err := s.admin(t).RotateSigningKey(ctxT(t), &leasev1.RotateSigningKeyRequest{Reason: strings.Repeat("r", 1<<20)})
	if status.Code(err) != codes.InvalidArgument || len(err.Error()) > 4096 {
		t.Errorf("a megabyte reason: %d bytes of %v", len(err.Error()), status.Code(err))
	}

	rot, err := s.admin(t).RotateSigningKey(ctxT(t), &leasev1.RotateSigningKeyRequest{Reason: "drill"})
	if err != nil {
		t.Fatal(err)
	}
	if rot.GetCurrentKeyId() == oldKid || len(rot.GetRetiredKeyIds()) != 1 || rot.GetRetiredKeyIds()[0] != oldKid {
		t.Fatalf("rotation: current %s retired %v, old key %s", rot.GetCurrentKeyId(), rot.GetRetiredKeyIds(), oldKid)
	}
	at, until := rot.GetRotatedAt().AsTime(), rot.GetRetiredPublishedUntil().AsTime()
	if want := at.Add(lease.MaxTTL + s.cfg.Skew + s.cfg.KeyCheckInterval); !until.Equal(want) || !until.After(old.GetClaims().GetExpiresAt().AsTime()) {
		t.Fatalf("retired key published until %v, want %v (after the old lease's expiry %v)", until, want, old.GetClaims().GetExpiresAt().AsTime())
	}

	fresh := s.issue(t, h)
	if kid := kidOf(t, fresh.GetToken()); kid != rot.GetCurrentKeyId() {
		t.Fatalf("a lease issued after the rotation is signed by %s, want %s", kid, rot.GetCurrentKeyId())
	}
	keysResp, err := s.alice(t).GetSigningKeys(ctxT(t), &leasev1.GetSigningKeysRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ks, _ := lease.ParseKeySet(keysResp.GetJwks())
	if _, ok := ks.Key(oldKid); !ok || keysResp.GetCurrentKeyId() != rot.GetCurrentKeyId() {
		t.Fatalf("JWKS after rotation: old key published %v, current %s", ok, keysResp.GetCurrentKeyId())
	}
	for name, r := range map[string]*leasev1.IssueResponse{"signed before the rotation": old, "signed after it": fresh} {
		v, err := s.alice(t).Verify(ctxT(t), verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims())))
		if err != nil || !v.GetValid() {
			t.Fatalf("lease %s: %v %s", name, err, v.GetFailure())
		}
	}
}
