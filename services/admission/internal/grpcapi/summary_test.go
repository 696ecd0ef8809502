package grpcapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// SummarizeDecisions counts the stored receipts of one (server, class,
// generation) for the rollout guard: a service sees them; a tenant user is
// PERMISSION_DENIED even for its own tenant's class; a megabyte field or a
// missing one is INVALID_ARGUMENT with a bounded answer.
func TestSummarizeDecisions(t *testing.T) {
	r := newRig(t, world(), nil)
	ctx := context.Background()
	alice := r.client(t, "alice", "demo-a")
	rec := check(t, alice, okReq()).GetReceipt()
	if err := r.writer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	req := &admissionv1.SummarizeDecisionsRequest{ServerId: rec.GetServerId(), AudienceClass: rec.GetAudienceClass(),
		Generation: rec.GetGeneration(), Since: timestamppb.New(time.Now().Add(-time.Hour))}
	svc := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, r.addr, r.auth.Service(t)))
	got, err := svc.SummarizeDecisions(ctx, req)
	if err != nil || got.GetChecks() != 1 || len(got.GetTools()) != 0 {
		t.Fatalf("summary of one ALLOW: %v %v", got, err)
	}
	if _, err := alice.SummarizeDecisions(ctx, req); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a tenant user: %v, want PermissionDenied", err)
	}
	huge := strings.Repeat("a", 1<<20)
	for name, edit := range map[string]func(*admissionv1.SummarizeDecisionsRequest){
		"server_id":      func(q *admissionv1.SummarizeDecisionsRequest) { q.ServerId = huge },
		"audience_class": func(q *admissionv1.SummarizeDecisionsRequest) { q.AudienceClass = huge },
		"generation":     func(q *admissionv1.SummarizeDecisionsRequest) { q.Generation = 0 },
		"since":          func(q *admissionv1.SummarizeDecisionsRequest) { q.Since = nil },
	} {
		q := &admissionv1.SummarizeDecisionsRequest{ServerId: req.ServerId, AudienceClass: req.AudienceClass, Generation: req.Generation, Since: req.Since}
		edit(q)
		_, err := svc.SummarizeDecisions(ctx, q)
		if status.Code(err) != codes.InvalidArgument || len(err.Error()) > 4096 {
			t.Errorf("%s: %v (%d bytes), want a short InvalidArgument", name, status.Code(err), len(err.Error()))
		}
	}
}
