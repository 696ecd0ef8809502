package review

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/services/registry/internal/contract"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

var (
	descA = "sha256:" + strings.Repeat("a", 64)
	descB = "sha256:" + strings.Repeat("b", 64)
)

func doc(scope string) *contract.Doc {
	d := contract.FromProto(&registryv1.ToolContract{
		ToolId: "srv.tool", Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: scope,
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER,
	})
	return &d
}

func approve(t *testing.T, id int64, desc string, c *contract.Doc) Approval {
	t.Helper()
	d, err := contract.ApprovalDigest(desc, *c)
	if err != nil {
		t.Fatal(err)
	}
	return Approval{ID: id, ApprovalDigest: d, DescriptorDigest: desc, Contract: *c, ContractVersion: id}
}

func TestEvaluate(t *testing.T) {
	c1, c2 := doc("s:1"), doc("s:2")
	a1 := approve(t, 1, descA, c1)
	cases := []struct {
		name      string
		desc      string
		c         *contract.Doc
		approvals []Approval
		want      registryv1.ReviewState
	}{
		{"no contract", descA, nil, nil, registryv1.ReviewState_REVIEW_STATE_PENDING_CONTRACT},
		{"contract, no approval", descA, c1, nil, registryv1.ReviewState_REVIEW_STATE_UNREVIEWED},
		{"approved", descA, c1, []Approval{a1}, registryv1.ReviewState_REVIEW_STATE_APPROVED},
		{"description changed at the source", descB, c1, []Approval{a1}, registryv1.ReviewState_REVIEW_STATE_UNREVIEWED},
		{"new contract published", descA, c2, []Approval{a1}, registryv1.ReviewState_REVIEW_STATE_UNREVIEWED},
		{"source went back to the approved descriptor", descA, c1, []Approval{approve(t, 2, descB, c1), a1}, registryv1.ReviewState_REVIEW_STATE_APPROVED},
	}
	for _, tc := range cases {
		st, err := Evaluate(tc.desc, tc.c, tc.approvals)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != tc.want {
			t.Errorf("%s: state %v, want %v", tc.name, st.State, tc.want)
		}
		if (tc.c == nil) != (st.ApprovalDigest == "") {
			t.Errorf("%s: approval digest %q", tc.name, st.ApprovalDigest)
		}
	}
}

func TestPlanRollback(t *testing.T) {
	c1, c2, c3 := doc("s:1"), doc("s:2"), doc("s:3")
	a1, a2, b2 := approve(t, 1, descA, c1), approve(t, 2, descA, c2), approve(t, 3, descB, c2)
	status := func(desc string, c *contract.Doc, approvals []Approval) Status {
		st, err := Evaluate(desc, c, approvals)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	cases := []struct {
		name         string
		current      []Status
		c            *contract.Doc
		approvals    []Approval
		wantWithdraw []int64
		wantRestore  int64
		wantReason   string
	}{
		{name: "unreviewed contract goes back to the newest approved one",
			current: []Status{status(descA, c3, []Approval{a2, a1})}, c: c3, approvals: []Approval{a2, a1}, wantRestore: 2},
		{name: "approved: newest approval withdrawn, previous one current",
			current: []Status{status(descA, c2, []Approval{a2, a1})}, c: c2, approvals: []Approval{a2, a1}, wantWithdraw: []int64{2}, wantRestore: 1},
		{name: "approved, only one approval", current: []Status{status(descA, c1, []Approval{a1})}, c: c1,
			approvals: []Approval{a1}, wantReason: "NO_APPROVED_VERSION"},
		{name: "never approved", current: []Status{status(descA, c1, nil)}, c: c1, wantReason: "NO_APPROVED_VERSION"},
		{name: "descriptor changed, contract already the approved one",
			current: []Status{status(descB, c2, []Approval{a2, a1})}, c: c2, approvals: []Approval{a2, a1}, wantReason: "NOTHING_TO_ROLL_BACK"},
		// Two audience classes see descriptors A and B; both are approved
		// under c2: both approvals are withdrawn, c1 (approved for A) is
		// current again.
		{name: "two variants approved: both withdrawn",
			current: []Status{status(descA, c2, []Approval{b2, a2, a1}), status(descB, c2, []Approval{b2, a2, a1})}, c: c2,
			approvals: []Approval{b2, a2, a1}, wantWithdraw: []int64{3, 2}, wantRestore: 1},
		// Only B's variant is approved under c2; A's is unreviewed. The
		// approval of B is withdrawn; A's approval under c1 becomes current.
		{name: "one of two variants approved",
			current: []Status{status(descA, c2, []Approval{b2, a1}), status(descB, c2, []Approval{b2, a1})}, c: c2,
			approvals: []Approval{b2, a1}, wantWithdraw: []int64{3}, wantRestore: 1},
		{name: "no variant at all", current: nil, c: c1, approvals: []Approval{a1}, wantReason: "NOTHING_TO_ROLL_BACK"},
	}
	for _, tc := range cases {
		plan, err := PlanRollback(tc.current, tc.c, tc.approvals)
		var refusal *RollbackRefusal
		if tc.wantReason != "" {
			if !errors.As(err, &refusal) || refusal.Reason != tc.wantReason {
				t.Errorf("%s: got %v, want refusal %s", tc.name, err, tc.wantReason)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(plan.Withdraw, tc.wantWithdraw) || plan.Restore.ID != tc.wantRestore {
			t.Errorf("%s: plan withdraw %v restore %d, want %v %d", tc.name, plan.Withdraw, plan.Restore.ID, tc.wantWithdraw, tc.wantRestore)
		}
	}
}
