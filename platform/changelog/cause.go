package changelog

import (
	"strings"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

const causePrefix = "POLICY_CHANGE_CAUSE_"

// PolicyCause returns what caused a registry policy change: its
// cause_code, or for a change written before cause_code existed, the
// deprecated cause string read as the enum value it names (UNSPECIFIED
// when it names none). Every reader of PolicyChange uses it.
func PolicyCause(pc *registryv1.PolicyChange) registryv1.PolicyChangeCause {
	if c := pc.GetCauseCode(); c != registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_UNSPECIFIED {
		return c
	}
	// The deprecated field is the fallback for changes written before the enum.
	legacy := pc.GetCause()
	if legacy == "" {
		return registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_UNSPECIFIED
	}
	return registryv1.PolicyChangeCause(registryv1.PolicyChangeCause_value[causePrefix+legacy])
}

// PolicyCauseName is the deprecated cause string of c (its enum name
// without `POLICY_CHANGE_CAUSE_`, e.g. `REVOKE`), which the registry
// writes beside cause_code for readers that predate it.
func PolicyCauseName(c registryv1.PolicyChangeCause) string {
	return strings.TrimPrefix(c.String(), causePrefix)
}

// NewPolicyChange returns the PolicyChange of a bump of tenant's epoch to
// epoch for cause, with both cause_code and the deprecated cause set.
func NewPolicyChange(tenant string, epoch int64, cause registryv1.PolicyChangeCause) *registryv1.PolicyChange {
	return &registryv1.PolicyChange{TenantId: tenant, PolicyEpoch: epoch, CauseCode: cause, Cause: PolicyCauseName(cause)}
}
