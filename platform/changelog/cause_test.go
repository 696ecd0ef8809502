package changelog

import (
	"testing"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// TestPolicyCause: a change carries its cause as the enum and, for older
// readers, the deprecated string; a reader prefers the enum and reads the
// string of a change written before the enum existed.
func TestPolicyCause(t *testing.T) {
	const (
		revoke = registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_REVOKE
		grant  = registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_GRANT
		none   = registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_UNSPECIFIED
	)
	pc := NewPolicyChange("tenant-a", 7, revoke)
	// The deprecated field is what older readers compare.
	if pc.GetCauseCode() != revoke || pc.GetCause() != "REVOKE" || pc.GetTenantId() != "tenant-a" || pc.GetPolicyEpoch() != 7 {
		t.Fatalf("written: %v", pc)
	}
	for _, c := range []struct {
		name string
		pc   *registryv1.PolicyChange
		want registryv1.PolicyChangeCause
	}{
		{"written now", pc, revoke},
		{"enum only", &registryv1.PolicyChange{CauseCode: revoke}, revoke},
		{"string only (written before the enum)", &registryv1.PolicyChange{Cause: "REVOKE"}, revoke},
		{"the enum wins", &registryv1.PolicyChange{Cause: "REVOKE", CauseCode: grant}, grant},
		{"every name round-trips", &registryv1.PolicyChange{Cause: PolicyCauseName(registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_TOOL_ROLLED_BACK)},
			registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_TOOL_ROLLED_BACK},
		{"unknown string", &registryv1.PolicyChange{Cause: "TEST"}, none},
		{"lowercase string", &registryv1.PolicyChange{Cause: "revoke"}, none},
		{"nothing", &registryv1.PolicyChange{}, none},
		{"nil", nil, none},
	} {
		if got := PolicyCause(c.pc); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	for v := range registryv1.PolicyChangeCause_name {
		c := registryv1.PolicyChangeCause(v)
		if c == none {
			continue
		}
		if got := PolicyCause(&registryv1.PolicyChange{Cause: PolicyCauseName(c)}); got != c {
			t.Errorf("%v: the legacy name %q reads back as %v", c, PolicyCauseName(c), got)
		}
	}
}
