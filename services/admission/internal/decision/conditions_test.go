package decision

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/condition"
)

func mustGrant(t *testing.T, subject, group string, scopes, classes []string, cond string) Grant {
	t.Helper()
	g := GrantOf(subject, group, scopes, classes, cond)
	if cond != "" && g.Condition == nil {
		t.Fatalf("condition %q does not compile", cond)
	}
	return g
}

func TestConditions(t *testing.T) {
	const scope, class = "refund:write", "acme.ops"
	in := func(amount string, groups ...string) *condition.Input {
		return &condition.Input{Principal: condition.Principal{Subject: "bob", Tenant: "acme", Groups: groups},
			Args: map[string]any{"amount": json.Number(amount)}, Request: condition.Request{Time: time.Unix(0, 0)}}
	}
	amount := mustGrant(t, "", "support", []string{scope}, []string{class}, condition.AmountExample)
	plain := mustGrant(t, "", "finance", []string{scope}, []string{class}, "")
	broken := Grant{Group: "support", Scopes: []string{scope}, Classes: []string{class}, ConditionText: "future_function()"}
	failing := mustGrant(t, "", "support", []string{scope}, []string{class}, `args.missing == 1`)
	other := mustGrant(t, "", "other", []string{scope}, []string{class}, "false")
	unrelated := mustGrant(t, "", "support", []string{"x:read"}, nil, "false")
	for _, tc := range []struct {
		name   string
		grants []Grant
		in     *condition.Input
		want   ConditionCheck
	}{
		{"true condition admits, named", []Grant{amount}, in("500", "support"), ConditionCheck{Admitting: "group:support"}},
		{"false condition, named", []Grant{amount}, in("501", "support"), ConditionCheck{Unmet: "group:support"}},
		{"unconditional grant wins, nothing evaluated", []Grant{failing, plain}, in("1", "support", "finance"), ConditionCheck{}},
		{"evaluation error fails closed", []Grant{failing}, in("1", "support"), ConditionCheck{Unmet: "group:support", Failed: true}},
		{"uncompilable condition fails closed", []Grant{broken}, in("1", "support"), ConditionCheck{Unmet: "group:support", Failed: true}},
		{"a grant of another group is not evaluated", []Grant{other, amount}, in("9", "support"), ConditionCheck{Admitting: "group:support"}},
		{"a grant giving neither scope nor class is not evaluated", []Grant{unrelated, amount}, in("600", "support"), ConditionCheck{Unmet: "group:support"}},
		{"second conditional grant admits", []Grant{failing, amount}, in("2", "support"), ConditionCheck{Admitting: "group:support"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Conditions(tc.grants, "bob", tc.in.Principal.Groups, scope, class, tc.in)
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestConditionUnmetDetailNamesTheGrantOnly(t *testing.T) {
	f := allowFacts()
	f.Conditions = ConditionCheck{Unmet: "group:support"}
	o := Decide(f)
	if o.Reason != ConditionUnmet || o.Detail != "the condition of grant group:support is not met" {
		t.Fatalf("got %v %q", o.Reason, o.Detail)
	}
	f.Conditions.Failed = true
	if o := Decide(f); o.Detail != "the condition of grant group:support could not be evaluated (fail closed)" {
		t.Fatalf("got %q", o.Detail)
	}
}

func TestOnlyConditional(t *testing.T) {
	const scope, class = "fs:read", "acme.readers"
	cond := mustGrant(t, "", "readers", []string{scope}, []string{class}, condition.PathExample)
	plainScope := mustGrant(t, "alice", "", []string{scope}, nil, "")
	plainClass := mustGrant(t, "", "readers", nil, []string{class}, "")
	if !OnlyConditional([]Grant{cond}, "alice", []string{"readers"}, scope, class) {
		t.Fatal("a conditional grant alone is conditional")
	}
	if OnlyConditional([]Grant{cond, plainScope, plainClass}, "alice", []string{"readers"}, scope, class) {
		t.Fatal("unconditional grants giving scope and class are not conditional")
	}
	if !OnlyConditional([]Grant{cond, plainScope}, "alice", []string{"readers"}, scope, class) {
		t.Fatal("the class only through a conditional grant is conditional")
	}
}

// BenchmarkConditions is the per-call work the conditions add to a cached
// Check admitted by a conditional grant (the benchmark world's grant).
func BenchmarkConditions(b *testing.B) {
	grants := []Grant{
		GrantOf("alice", "", []string{"shipment:read"}, []string{"demo-a.readers"}, ""),
		GrantOf("", "conditional-readers", []string{"shipment:read"}, []string{"demo-a.readers"},
			`args.shipment_id.startsWith("S-") && principal.tenant == "demo-a" && request.mode == "AUTONOMOUS"`),
	}
	in := &condition.Input{Principal: condition.Principal{Subject: "carl", Tenant: "demo-a", Groups: []string{"conditional-readers"}},
		Args: map[string]any{"shipment_id": "S-1042"}, Request: condition.Request{Mode: "AUTONOMOUS", Time: time.Unix(0, 0)}}
	for b.Loop() {
		if c := Conditions(grants, "carl", in.Principal.Groups, "shipment:read", "demo-a.readers", in); c.Admitting == "" {
			b.Fatal(c)
		}
	}
}
