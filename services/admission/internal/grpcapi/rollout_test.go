package grpcapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
)

const labelTool = "logistics.create_label"

// withWriteTool adds a WRITE tool (same scope) to demo-a's generation 7.
func withWriteTool(s *sources) *sources {
	s.gens[[2]string{"logistics", "demo-a.readers"}][7].Tools[labelTool] = &replica.ToolEntry{ToolID: labelTool,
		Name: "create_label", Description: "Create a shipping label.", DescriptorDigest: digB,
		InputSchemaDigest: "sha256:" + strings.Repeat("c", 64), InputSchema: []byte(schema)}
	s.reviews[labelTool+"@"+digB] = decision.Review{Known: true, Enabled: true, Trust: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		Approved: &decision.Contract{Effect: catalogv1.EffectClass_EFFECT_CLASS_WRITE, Scope: "shipment:read"}}
	return s
}

// setStage appends demo-a's policy at the next epoch with stage ro for
// (logistics, demo-a.readers) and moves the heads there; it returns the
// new epoch.
func (r *rig) setStage(ro *decision.Rollout) int64 {
	r.src.mu.Lock()
	ps := r.src.policies["demo-a"]
	p := ps[len(ps)-1]
	p.Epoch++
	p.Stages = nil
	if ro != nil {
		p.Stages = map[replica.StageKey]*decision.Rollout{{Server: "logistics", Class: "demo-a.readers"}: ro}
	}
	r.src.policies["demo-a"] = append(ps, p)
	r.src.mu.Unlock()
	r.heads.SetEpoch("demo-a", p.Epoch)
	return p.Epoch
}

func labelReq(run string) *admissionv1.CheckRequest {
	return &admissionv1.CheckRequest{ToolId: labelTool, Generation: 7, DescriptorDigest: digB,
		Arguments: []byte(`{"shipment_id":"S1"}`), Mode: admissionv1.Mode_MODE_USER_CONFIRMED, RunId: run}
}

func statusReq(run string) *admissionv1.CheckRequest {
	q := okReq()
	q.PolicyEpoch, q.RunId = 0, run
	return q
}

func listed(t *testing.T, c admissionv1.AdmissionServiceClient, run string) map[string]bool {
	t.Helper()
	resp, err := c.ListVisibleTools(context.Background(), &admissionv1.ListVisibleToolsRequest{RunId: run})
	if err != nil {
		t.Fatalf("ListVisibleTools(run %q): %v", run, err)
	}
	out := map[string]bool{}
	for _, vt := range resp.GetTools() {
		out[vt.GetRuntime().GetToolId()] = true
	}
	return out
}

// TestRolloutStagesThroughTheAPI walks demo-a's pair (logistics,
// demo-a.readers) FULL → SHADOW → CANARY 50 % read-only → FULL through the
// API, each a new epoch: Check and ListVisibleTools follow the stage of
// the epoch they decide at, each answer asked twice (the second from the
// decision cache, which must never hand one run's canary answer to
// another), and the two agree run by run. demo-b's class reads the same
// server and is never affected.
func TestRolloutStagesThroughTheAPI(t *testing.T) {
	r := newRig(t, withWriteTool(world()), nil)
	a, b := r.client(t, "alice", "demo-a"), r.client(t, "alice", "demo-b")
	const (
		allow     = decision.Allow
		notFound  = decision.NotFound
		forbidden = decision.Forbidden
	)
	// ask checks q as alice, a user-confirmed q asserted by a confirmer.
	ask := func(q *admissionv1.CheckRequest) *admissionv1.CheckResponse {
		t.Helper()
		var opts []grpc.CallOption
		if q.GetMode() == admissionv1.Mode_MODE_USER_CONFIRMED {
			opts = append(opts, grpc.PerRPCCredentials(principal.ConfirmerToken(r.auth.Confirmer(t))))
		}
		resp, err := a.Check(context.Background(), q, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	expect := func(stage string, q *admissionv1.CheckRequest, want decision.Reason, tag string) {
		t.Helper()
		for i := range 2 {
			resp := ask(q)
			if resp.GetReason() != want || !strings.Contains(resp.GetDetail(), tag) {
				t.Fatalf("%s, %s run %q (call %d): %v %q, want %v (%q)", stage, q.GetToolId(), q.GetRunId(), i, resp.GetReason(), resp.GetDetail(), want, tag)
			}
		}
	}
	both := map[string]bool{"logistics.shipment_status": true, labelTool: true}

	expect("full", statusReq("run-1"), allow, "")
	expect("full", labelReq(""), allow, "")
	if got := listed(t, a, ""); len(got) != 2 || !got[labelTool] {
		t.Fatalf("full: listed %v, want both tools", got)
	}

	r.setStage(&decision.Rollout{Stage: registryv1.Stage_STAGE_SHADOW})
	for _, q := range []*admissionv1.CheckRequest{statusReq("run-1"), labelReq("run-8"), statusReq("")} {
		expect("shadow", q, notFound, "in shadow")
		resp := ask(q)
		rc := resp.GetReceipt()
		if resp.GetCurrentGeneration() != 0 || resp.GetCurrentDescriptorDigest() != "" || rc.GetGeneration() != 0 ||
			rc.GetDescriptorDigest() != "" || rc.GetServerId() != "" || rc.GetAudienceClass() != "demo-a.readers" {
			t.Fatalf("shadow: the answer names the generation: current %d/%q, receipt %v", resp.GetCurrentGeneration(), resp.GetCurrentDescriptorDigest(), rc)
		}
	}
	if got := listed(t, a, "run-8"); len(got) != 0 {
		t.Fatalf("shadow: listed %v", got)
	}
	if resp, err := a.ListVisibleTools(context.Background(), &admissionv1.ListVisibleToolsRequest{RunId: "run-8"}); err != nil || len(resp.GetServers()) != 0 {
		t.Fatalf("shadow: servers %v, %v (a server in shadow passes nothing through)", resp.GetServers(), err)
	}
	if got := check(t, b, okReq()); got.GetReason() != allow {
		t.Fatalf("demo-b while demo-a's pair is in shadow: %v %q", got.GetReason(), got.GetDetail())
	}

	r.setStage(&decision.Rollout{Stage: registryv1.Stage_STAGE_CANARY, Percent: 50,
		Effects: []catalogv1.EffectClass{catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY}})
	expect("canary", statusReq(""), forbidden, "canary: ")
	expect("canary", labelReq(""), forbidden, "canary: ")
	if got := listed(t, a, ""); len(got) != 0 {
		t.Fatalf("canary, no run id: listed %v", got)
	}
	inside := 0
	for i := range 200 {
		run := fmt.Sprintf("run-%d", i)
		in := decision.CanaryBucket("logistics", "demo-a.readers", run) < 5000
		got := listed(t, a, run)
		if in {
			inside++
			expect("canary", statusReq(run), allow, "")
			if !got["logistics.shipment_status"] || got[labelTool] {
				t.Fatalf("canary, run %s inside: listed %v, want the read-only tool only", run, got)
			}
		} else {
			expect("canary", statusReq(run), forbidden, "outside the 50% canary")
			if len(got) != 0 {
				t.Fatalf("canary, run %s outside: listed %v", run, got)
			}
		}
		// A write tool is never in a read-only canary, inside or out.
		expect("canary", labelReq(run), forbidden, "canary: ")
	}
	// Planned at the FULL epoch 5, an outside run's denial is new:
	// POLICY_REVOKED; planned at the SHADOW epoch 6 it is not: FORBIDDEN.
	// Each answer twice: the plan's epoch and its stage are in the key.
	for epoch, want := range map[int64]decision.Reason{5: decision.PolicyRevoked, 6: forbidden} {
		q := statusReq("run-1") // bucket 7882: outside 50 %
		q.PolicyEpoch = epoch
		expect(fmt.Sprintf("canary, planned at epoch %d", epoch), q, want, "canary: ")
	}
	if inside < 70 || inside > 130 {
		t.Fatalf("%d of 200 runs inside a 50%% canary", inside)
	}
	if got := check(t, b, okReq()); got.GetReason() != allow {
		t.Fatalf("demo-b while demo-a's pair is in canary: %v %q", got.GetReason(), got.GetDetail())
	}

	r.setStage(nil) // FULL again
	expect("full again", statusReq(""), allow, "")
	expect("full again", labelReq("run-1"), allow, "")
	if got := listed(t, a, "run-1"); len(got) != len(both) {
		t.Fatalf("full again: listed %v", got)
	}
}

// TestShadowInOneClassReadsThroughAnother: alice reads logistics through
// two classes; with the pair of one in SHADOW a Check naming no class is
// decided through the other (as ListVisibleTools lists it), and one naming
// the shadowed class is NOT_FOUND saying shadow.
func TestShadowInOneClassReadsThroughAnother(t *testing.T) {
	src := world()
	p := &src.policies["demo-a"][0]
	p.Grants[0].Classes = []string{"demo-a.auditors", "demo-a.readers"}
	p.Classes["demo-a.auditors"] = []string{"logistics"}
	src.gens[[2]string{"logistics", "demo-a.auditors"}] = src.gens[[2]string{"logistics", "demo-a.readers"}]
	src.pointers[[2]string{"logistics", "demo-a.auditors"}] = replica.Pointer{ServerID: "logistics", Class: "demo-a.auditors",
		Tenant: "demo-a", Generation: 7, FreshUntil: time.Now().Add(time.Hour), Revision: 2}
	r := newRig(t, src, nil)
	a := r.client(t, "alice", "demo-a")
	r.src.mu.Lock()
	next := *p
	next.Epoch = 6
	next.Stages = map[replica.StageKey]*decision.Rollout{{Server: "logistics", Class: "demo-a.auditors"}: {Stage: registryv1.Stage_STAGE_SHADOW}}
	r.src.policies["demo-a"] = append(r.src.policies["demo-a"], next)
	r.src.mu.Unlock()
	r.heads.SetEpoch("demo-a", 6)

	resp := check(t, a, statusReq(""))
	if resp.GetReason() != decision.Allow || resp.GetReceipt().GetAudienceClass() != "demo-a.readers" {
		t.Fatalf("no class named: %v %q through %q", resp.GetReason(), resp.GetDetail(), resp.GetReceipt().GetAudienceClass())
	}
	q := statusReq("")
	q.AudienceClass = "demo-a.auditors"
	if resp := check(t, a, q); resp.GetReason() != decision.NotFound || !strings.Contains(resp.GetDetail(), "in shadow") {
		t.Fatalf("shadowed class named: %v %q", resp.GetReason(), resp.GetDetail())
	}
	list, err := a.ListVisibleTools(context.Background(), &admissionv1.ListVisibleToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetTools()) != 1 || list.GetTools()[0].GetRuntime().GetAudienceClass() != "demo-a.readers" {
		t.Fatalf("listed %v", list.GetTools())
	}
}

func TestListVisibleToolsRefusesAMalformedRunID(t *testing.T) {
	r := newRig(t, world(), nil)
	for _, run := range []string{strings.Repeat("r", 129), "run id", "-run", strings.Repeat("r", 1<<20)} {
		_, err := r.client(t, "alice", "demo-a").ListVisibleTools(context.Background(), &admissionv1.ListVisibleToolsRequest{RunId: run})
		if status.Code(err) != codes.InvalidArgument || len(err.Error()) > 4096 {
			t.Fatalf("run of %d bytes: %d bytes of %v, want a short INVALID_ARGUMENT", len(run), len(err.Error()), status.Code(err))
		}
	}
}
