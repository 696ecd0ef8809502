package grpcapi

import (
	"slices"
	"testing"

	"github.com/toolcrib/toolcrib/platform/apierror"
)

// TestClassAndServerFollowTheRegistryGrammar pins discovery's audience
// class and server id checks to the registry's grammar (platform/ids):
// discovery once accepted '_' in the tenant part and '.' in the class part,
// names the registry never stores.
func TestClassAndServerFollowTheRegistryGrammar(t *testing.T) {
	for name, ok := range map[string]bool{
		"tenant-a.readers":     true,
		"tenant-a.read_ers-2":  true,
		"tenant_a.readers":     false,
		"tenant-a.read.ers":    false,
		"tenant-a":             false,
		"Tenant-a.readers":     false,
		"tenant-a._readers":    false,
		"tenant-a.readers\x00": false,
	} {
		var v apierror.Violations
		checkClass(&v, "audience_class", name, true)
		if (len(v) == 0) != ok {
			t.Errorf("class %q: %v", name, v)
		}
		if !ok && (len(v) != 1 || v[0].Field != "audience_class" || v[0].Description != "must be <tenant_id>.<class>: lowercase letters, digits and - in the tenant, lowercase letters, digits, - and _ in the class") {
			t.Errorf("class %q: violation %v", name, v)
		}
	}
	var v apierror.Violations
	checkClass(&v, "audience_class", "", false)
	checkServer(&v, "server_id", "a_b-c")
	checkServer(&v, "server_id", "a.b")
	if want := []apierror.FieldViolation{{Field: "server_id", Description: "must match [a-z0-9][a-z0-9_-]{0,62}"}}; !slices.Equal(v, want) {
		t.Errorf("violations %v, want %v", v, want)
	}
}
