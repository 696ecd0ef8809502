package grpcapi

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// countsOf renders a CountDecisions answer as "REASON=n,…" for exact
// comparison.
func countsOf(r *admissionv1.CountDecisionsResponse) string {
	var b []string
	for _, c := range r.GetReasons() {
		b = append(b, strings.TrimPrefix(c.GetReason().String(), "DECISION_REASON_")+"="+strconv.FormatInt(c.GetCount(), 10))
	}
	return strings.Join(b, ",")
}

// violatedField is the one field of an INVALID_ARGUMENT's BadRequest.
func violatedField(t *testing.T, err error) string {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("%v, want InvalidArgument", err)
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) == 1 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	t.Fatalf("no single field violation in %v", st.Details())
	return ""
}

// CountDecisions counts a tool's stored receipts per reason, scoped to the
// caller: two tenants decide the same tool id, each tenant's user sees
// only its own tenant's counts (never the other's), a user of a third
// tenant sees nothing, a platform admin sees both; bad input (a megabyte
// tool id, a tool id outside the grammar, no since, a since in the future
// or more than the window back) is INVALID_ARGUMENT naming the field, with
// a bounded answer.
func TestCountDecisionsIsScopedToTheCallersTenant(t *testing.T) {
	r := newRig(t, world(), nil)
	ctx := context.Background()
	a, b := r.client(t, "alice", "demo-a"), r.client(t, "alice", "demo-b")
	wantReason := func(c admissionv1.AdmissionServiceClient, edit func(*admissionv1.CheckRequest), want catalogv1.DecisionReason) {
		t.Helper()
		q := okReq()
		if edit != nil {
			edit(q)
		}
		if got := check(t, c, q).GetReason(); got != want {
			t.Fatalf("Check: %v, want %v", got, want)
		}
	}
	allow := catalogv1.DecisionReason_DECISION_REASON_ALLOW
	wantReason(a, nil, allow)
	wantReason(a, nil, allow)
	wantReason(a, func(q *admissionv1.CheckRequest) { q.Arguments = []byte(`{"shipment_id":42}`) },
		catalogv1.DecisionReason_DECISION_REASON_ARGUMENTS_INVALID)
	wantReason(b, nil, allow)
	wantReason(b, func(q *admissionv1.CheckRequest) { q.DescriptorDigest = digB },
		catalogv1.DecisionReason_DECISION_REASON_STALE_SCHEMA)
	if err := r.writer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	hourAgo := timestamppb.New(time.Now().Add(-time.Hour))
	req := &admissionv1.CountDecisionsRequest{ToolId: "logistics.shipment_status", Since: hourAgo}
	admin := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, r.addr, r.auth.Admin(t)))
	for _, tc := range []struct {
		name   string
		c      admissionv1.AdmissionServiceClient
		req    *admissionv1.CountDecisionsRequest
		want   string
		total  int64
		allTen bool
	}{
		{"tenant a", a, req, "ALLOW=2,ARGUMENTS_INVALID=1", 3, false},
		{"tenant b", b, req, "ALLOW=1,STALE_SCHEMA=1", 2, false},
		{"another user of tenant b", r.client(t, "bob", "demo-b"), req, "ALLOW=1,STALE_SCHEMA=1", 2, false},
		{"a third tenant", r.client(t, "carol", "demo-c"), req, "", 0, false},
		{"admin", admin, req, "ALLOW=3,STALE_SCHEMA=1,ARGUMENTS_INVALID=1", 5, true},
		{"another tool", admin, &admissionv1.CountDecisionsRequest{ToolId: "logistics.other", Since: hourAgo}, "", 0, true},
		{"since after the checks", a, &admissionv1.CountDecisionsRequest{ToolId: req.ToolId, Since: timestamppb.Now()}, "", 0, false},
	} {
		got, err := tc.c.CountDecisions(ctx, tc.req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if countsOf(got) != tc.want || got.GetTotal() != tc.total || got.GetAllTenants() != tc.allTen {
			t.Errorf("%s: %q total %d all %v, want %q total %d all %v", tc.name, countsOf(got), got.GetTotal(),
				got.GetAllTenants(), tc.want, tc.total, tc.allTen)
		}
	}

	huge := strings.Repeat("a", 1<<20) + ".x"
	for _, tc := range []struct {
		name, field string
		req         *admissionv1.CountDecisionsRequest
	}{
		{"a megabyte tool id", "tool_id", &admissionv1.CountDecisionsRequest{ToolId: huge, Since: hourAgo}},
		{"no tool id", "tool_id", &admissionv1.CountDecisionsRequest{Since: hourAgo}},
		{"a tool id without a name", "tool_id", &admissionv1.CountDecisionsRequest{ToolId: "logistics", Since: hourAgo}},
		{"an upper-case server", "tool_id", &admissionv1.CountDecisionsRequest{ToolId: "Logistics.shipment_status", Since: hourAgo}},
		{"no since", "since", &admissionv1.CountDecisionsRequest{ToolId: req.ToolId}},
		{"an invalid since", "since", &admissionv1.CountDecisionsRequest{ToolId: req.ToolId, Since: &timestamppb.Timestamp{Nanos: -1}}},
		{"since in the future", "since", &admissionv1.CountDecisionsRequest{ToolId: req.ToolId, Since: timestamppb.New(time.Now().Add(time.Hour))}},
		{"since past the window", "since", &admissionv1.CountDecisionsRequest{ToolId: req.ToolId, Since: timestamppb.New(time.Now().Add(-MaxCountWindow - time.Minute))}},
	} {
		for _, c := range []admissionv1.AdmissionServiceClient{a, admin} {
			_, err := c.CountDecisions(ctx, tc.req)
			if got := violatedField(t, err); got != tc.field || len(err.Error()) > 4096 {
				t.Errorf("%s: field %q (%d bytes), want %q and a short answer", tc.name, got, len(err.Error()), tc.field)
			}
		}
	}
}
