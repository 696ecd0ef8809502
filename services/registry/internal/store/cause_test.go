package store

import (
	"context"
	"testing"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// TestPolicyChangesCarryTheCauseTwice: every logged PolicyChange carries
// its cause as the enum (cause_code) and, for readers that predate it, as
// the deprecated string of the same name.
func TestPolicyChangesCarryTheCauseTwice(t *testing.T) {
	s, _ := newStore(t)
	seed(t, s)
	ctx := context.Background()
	g := GrantChange{TenantID: "acme", Subject: "carol", Scopes: []string{"a"}}
	if _, _, err := s.Grant(ctx, g); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Revoke(ctx, g); err != nil {
		t.Fatal(err)
	}
	entries, err := s.log.Read(ctx, 0, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	var got []*registryv1.PolicyChange
	for _, e := range entries {
		ch, err := DecodeChange(e)
		if err != nil {
			t.Fatal(err)
		}
		if p := ch.GetPolicy(); p.GetGrant().GetSubject() == "carol" {
			got = append(got, p)
		}
	}
	want := []registryv1.PolicyChangeCause{registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_GRANT, registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_REVOKE}
	if len(got) != len(want) {
		t.Fatalf("%d policy changes of carol's grant, want %d", len(got), len(want))
	}
	for i, p := range got {
		// The deprecated string is what readers that predate cause_code compare.
		if p.GetCauseCode() != want[i] || p.GetCause() != []string{"GRANT", "REVOKE"}[i] {
			t.Errorf("change %d: cause_code %v, cause %q; want %v", i, p.GetCauseCode(), p.GetCause(), want[i])
		}
	}
}
