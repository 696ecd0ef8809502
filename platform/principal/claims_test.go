package principal

import (
	"strings"
	"testing"
)

// Only allow-listed claims with string values of at most
// MaxConditionClaimBytes reach a condition; a longer one is absent, never
// cut.
func TestConditionClaimsAllowList(t *testing.T) {
	raw := map[string]any{
		"department": "finance", "cost_center": "cc-17", "secret": "not listed",
		"level": 3.0, "long": strings.Repeat("x", MaxConditionClaimBytes+1),
	}
	got := conditionClaims(raw, []string{"department", "cost_center", "level", "long", "missing"})
	if len(got) != 2 || got["department"] != "finance" || got["cost_center"] != "cc-17" {
		t.Fatalf("got %v", got)
	}
	if conditionClaims(raw, []string{"missing"}) != nil {
		t.Fatal("no claim kept must be nil")
	}
}
