package lease_test

import (
	"strings"
	"testing"
	"time"

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
	if err := ring.Rotate(ctxT(t)); err != nil {
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
