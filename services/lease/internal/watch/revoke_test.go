package watch

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
)

// TestRevokedBefore: only a REVOKE of the lease's subject's grant, at a
// later epoch than the lease's, committed more than the allowance before
// the lease's issue, is found; a replayed change is kept once.
func TestRevokedBefore(t *testing.T) {
	v := New(Options{})
	at := time.Date(2026, 12, 1, 12, 0, 0, 500_000_000, time.UTC)
	change := func(rev int64, cause registryv1.PolicyChangeCause, subject, group string, epoch int64) *registryv1.Change {
		pc := changelog.NewPolicyChange("tenant-a", epoch, cause)
		pc.Grant = &registryv1.Grant{TenantId: "tenant-a", Subject: subject, Group: group}
		return &registryv1.Change{Revision: rev, CommittedAt: timestamppb.New(at), Object: &registryv1.Change_Policy{Policy: pc}}
	}
	const (
		grant  = registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_GRANT
		revoke = registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_REVOKE
	)
	v.applyRegistry(change(1, grant, "carol", "", 4))
	v.applyRegistry(change(2, revoke, "", "readers", 5)) // a group grant: not matched
	v.applyRegistry(change(3, revoke, "carol", "", 6))
	v.applyRegistry(change(3, revoke, "carol", "", 6)) // replayed
	if n := len(v.revokes[subjectKey{"tenant-a", "carol"}]); n != 1 || len(v.revokes) != 1 {
		t.Fatalf("%d revocations kept", n)
	}
	for _, c := range []struct {
		name     string
		subject  string
		epoch    int64
		issuedAt time.Time
		want     bool
	}{
		{"issued 2.5 s after the revoke, at the epoch before it", "carol", 5, at.Add(2500 * time.Millisecond).Truncate(time.Second), true},
		{"issued within the allowance", "carol", 5, at.Add(time.Second).Truncate(time.Second), false},
		{"issued before the revoke", "carol", 5, at.Add(-time.Second), false},
		{"at the revoke's epoch (decided after it)", "carol", 6, at.Add(5 * time.Second), false},
		{"another subject", "dave", 5, at.Add(5 * time.Second), false},
	} {
		r, ok := v.RevokedBefore("tenant-a", c.subject, c.epoch, c.issuedAt, time.Second)
		if ok != c.want || (ok && (r.Epoch != 6 || r.Revision != 3)) {
			t.Errorf("%s: %v %v, want %v", c.name, r, ok, c.want)
		}
	}
	if _, ok := v.RevokedBefore("tenant-b", "carol", 5, at.Add(time.Hour), time.Second); ok {
		t.Error("another tenant's lease matched")
	}
}

// TestRevocationCauseEnumAndLegacyString: a revocation is recognised by
// the cause enum alone (a registry that no longer fills the deprecated
// string) and by the string alone (a change written before the enum).
func TestRevocationCauseEnumAndLegacyString(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for name, pc := range map[string]*registryv1.PolicyChange{
		"enum only":   {CauseCode: registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_REVOKE},
		"string only": {Cause: "REVOKE"},
	} {
		v := New(Options{})
		pc.TenantId, pc.PolicyEpoch, pc.Grant = "tenant-a", 6, &registryv1.Grant{TenantId: "tenant-a", Subject: "carol"}
		v.applyRegistry(&registryv1.Change{Revision: 3, CommittedAt: timestamppb.New(at), Object: &registryv1.Change_Policy{Policy: pc}})
		if r, ok := v.RevokedBefore("tenant-a", "carol", 5, at.Add(5*time.Second), time.Second); !ok || r.Epoch != 6 || r.Revision != 3 {
			t.Errorf("%s: %v %v, want the revocation at epoch 6", name, r, ok)
		}
	}
	v := New(Options{})
	v.applyRegistry(&registryv1.Change{Revision: 3, CommittedAt: timestamppb.New(at), Object: &registryv1.Change_Policy{Policy: &registryv1.PolicyChange{
		TenantId: "tenant-a", PolicyEpoch: 6, Cause: "REVOKE", CauseCode: registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_GRANT,
		Grant: &registryv1.Grant{TenantId: "tenant-a", Subject: "carol"}}}})
	if _, ok := v.RevokedBefore("tenant-a", "carol", 5, at.Add(5*time.Second), time.Second); ok {
		t.Error("the enum says GRANT, the string REVOKE: the enum must win")
	}
}
