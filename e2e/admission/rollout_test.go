package admission

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/discovery"
)

const labelID = "inventory.create_label"

// labelTool is a write tool the world's source adds.
var labelTool = fixture.MustRawTool(`{"name":"create_label","description":"Create a shipping label for a shipment.",
"inputSchema":{"type":"object","properties":{"shipment_id":{"type":"string"}},"required":["shipment_id"]}}`)

// inCanary is the documented canary rule (admission.proto, Check, rule
// 12), written here independently of admission's code: the first 8 bytes
// of sha256("<server>|<class>|<run>"), big-endian, modulo 10,000, below
// percent × 100.
func inCanary(server, class, run string, percent int) bool {
	sum := sha256.Sum256([]byte(server + "|" + class + "|" + run))
	return binary.BigEndian.Uint64(sum[:8])%10_000 < uint64(percent*100)
}

// rolloutWorld is the world with a replica and the two tools' plans.
type rolloutWorld struct {
	*world
	ctx   context.Context
	alice admissionv1.AdmissionServiceClient
	// labelDigest is create_label's digest in w.generation.
	labelDigest string
}

func (r *rolloutWorld) statusReq(run string) *admissionv1.CheckRequest {
	return &admissionv1.CheckRequest{ToolId: toolID, Generation: r.generation, DescriptorDigest: r.digest,
		Arguments: []byte(`{"shipment_id":"s-1"}`), Mode: admissionv1.Mode_MODE_AUTONOMOUS, RunId: run}
}

func (r *rolloutWorld) labelReq(run string) *admissionv1.CheckRequest {
	return &admissionv1.CheckRequest{ToolId: labelID, Generation: r.generation, DescriptorDigest: r.labelDigest,
		Arguments: []byte(`{"shipment_id":"s-1"}`), Mode: admissionv1.Mode_MODE_USER_CONFIRMED, RunId: run}
}

func (r *rolloutWorld) setStage(t *testing.T, stage registryv1.Stage, why string) *registryv1.SetRolloutStageResponse {
	t.Helper()
	resp, err := r.st.Registry.SetRolloutStage(r.ctx, &registryv1.SetRolloutStageRequest{ServerId: serverID, AudienceClass: classA,
		Stage: stage, Reason: why})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetChanged() {
		t.Fatalf("SetRolloutStage %v: nothing changed", stage)
	}
	return resp
}

// moves sets the stage and checks q until the answer is want (reason and
// a detail holding tag): the first such answer must be decided within the
// revocation bound (1 s) of the call's return, and no earlier answer may
// come back after it.
func (r *rolloutWorld) moves(t *testing.T, stage registryv1.Stage, q *admissionv1.CheckRequest, want catalogv1.DecisionReason, tag string) int64 {
	t.Helper()
	before := r.check1(t, q)
	set := r.setStage(t, stage, "rollout e2e: "+stage.String())
	returned := time.Now()
	for {
		resp := r.check1(t, q)
		if resp.GetReason() == want && strings.Contains(resp.GetDetail(), tag) {
			lag := resp.GetReceipt().GetDecidedAt().AsTime().Sub(returned)
			t.Logf("%v: the first %v %.1f ms after SetRolloutStage returned", stage, want, float64(lag.Microseconds())/1000)
			if lag > time.Second {
				t.Fatalf("%v: the decision moved %v after the stage change, want ≤ 1 s", stage, lag)
			}
			if resp.GetCurrentPolicyEpoch() != set.GetPolicyEpoch() {
				t.Fatalf("%v: decided at epoch %d, the stage change is epoch %d", stage, resp.GetCurrentPolicyEpoch(), set.GetPolicyEpoch())
			}
			break
		}
		if resp.GetReason() != before.GetReason() || time.Since(returned) > 5*time.Second {
			t.Fatalf("%v: %v %q on the way from %v to %v", stage, resp.GetReason(), resp.GetDetail(), before.GetReason(), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
	for range 20 {
		if resp := r.check1(t, q); resp.GetReason() != want {
			t.Fatalf("%v: %v %q after %v", stage, resp.GetReason(), resp.GetDetail(), want)
		}
	}
	return set.GetPolicyEpoch()
}

func (r *rolloutWorld) check1(t *testing.T, q *admissionv1.CheckRequest) *admissionv1.CheckResponse {
	t.Helper()
	resp, err := r.alice.Check(r.ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (r *rolloutWorld) listed(t *testing.T, run string) map[string]bool {
	t.Helper()
	resp, err := r.alice.ListVisibleTools(r.ctx, &admissionv1.ListVisibleToolsRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, vt := range resp.GetTools() {
		out[vt.GetRuntime().GetToolId()] = true
	}
	return out
}

// addLabelTool adds create_label at the source, proves the generation
// holding it and publishes, approves and enables it (WRITE, the world's
// scope); the plans move to that generation.
func (r *rolloutWorld) addLabelTool(t *testing.T) {
	t.Helper()
	from := r.pointerRevision(t)
	if _, err := r.srv.Apply(fixture.Upsert(labelTool)); err != nil {
		t.Fatal(err)
	}
	key := discovery.PointerKey{ServerID: serverID, AudienceClass: classA}
	if _, err := r.st.Discovery.TriggerScan(r.ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: classA}); err != nil {
		t.Fatal(err)
	}
	got, err := discovery.WaitPointers(r.ctx, r.st.Discovery, from, []discovery.PointerKey{key}, func(p *discoveryv1.ActivePointer) bool {
		return p.GetGeneration() > r.generation
	})
	if err != nil {
		t.Fatal(err)
	}
	r.generation = got[key].GetGeneration()
	active, err := r.st.Discovery.GetActiveSnapshot(r.ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: classA})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range active.GetSnapshot().GetTools() {
		switch d.GetToolId() {
		case labelID:
			r.labelDigest = d.GetDescriptorDigest()
		case toolID:
			if d.GetDescriptorDigest() != r.digest {
				t.Fatalf("%s changed digest in generation %d", toolID, r.generation)
			}
		}
	}
	if r.labelDigest == "" {
		t.Fatalf("generation %d has no %s", r.generation, labelID)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := r.st.Registry.GetTool(r.ctx, &registryv1.GetToolRequest{ToolId: labelID})
		if err == nil && resp.GetTool().GetDescriptorDigest() == r.labelDigest {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry did not learn %s: %v", labelID, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pub, err := r.st.Registry.PublishContract(r.ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: labelID, Effect: catalogv1.EffectClass_EFFECT_CLASS_WRITE, Scope: scope,
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.Registry.ApproveTool(r.ctx, &registryv1.ApproveToolRequest{ToolId: labelID, ApprovalDigest: pub.GetTool().GetApprovalDigest()}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.Registry.EnableTool(r.ctx, &registryv1.EnableToolRequest{ToolId: labelID}); err != nil {
		t.Fatal(err)
	}
}

// TestRolloutShadowCanaryFull walks tenant-a's (inventory, readers) pair
// through the real registry, discovery and admission: FULL admits the
// read-only tool; SHADOW is NOT_FOUND saying shadow — also for a new
// generation discovery proves and stores while in shadow, with a write
// tool the owner approves and enables — and lists nothing; CANARY at the
// default 5 % read-only admits the read-only tool for the runs the
// documented hash puts inside, about 5 % of 10,000 run ids, and the write
// tool for none; FULL admits both. Every stage change moves the decision
// within the revocation bound.
func TestRolloutShadowCanaryFull(t *testing.T) {
	ctx := ctxFor(t)
	w := newWorld(t)
	r := &rolloutWorld{world: w, ctx: ctx}
	// alice's user-confirmed Checks (of the WRITE tool) are asserted by a
	// confirmer, as the gateway's are.
	r.alice = w.confirmedClient(t, w.startReplica(t, 5*time.Second), "alice", tenantA)

	if resp := r.check1(t, r.statusReq("run-0")); resp.GetReason() != allow {
		t.Fatalf("full: %v %q", resp.GetReason(), resp.GetDetail())
	}

	// SHADOW, then a new generation proven in shadow.
	r.moves(t, registryv1.Stage_STAGE_SHADOW, r.statusReq("run-0"), notFound, "in shadow")
	r.addLabelTool(t)
	for _, q := range []*admissionv1.CheckRequest{r.statusReq("run-0"), r.statusReq(""), r.labelReq("run-0")} {
		resp := r.check1(t, q)
		if resp.GetReason() != notFound || !strings.Contains(resp.GetDetail(), "in shadow") ||
			resp.GetCurrentGeneration() != 0 || resp.GetReceipt().GetGeneration() != 0 || resp.GetCurrentDescriptorDigest() != "" {
			t.Fatalf("shadow, %s at generation %d: %v %q, current generation %d, receipt %v", q.GetToolId(), r.generation,
				resp.GetReason(), resp.GetDetail(), resp.GetCurrentGeneration(), resp.GetReceipt())
		}
	}
	if got := r.listed(t, "run-0"); len(got) != 0 {
		t.Fatalf("shadow: listed %v", got)
	}

	// CANARY, default share and effects (5 %, read-only). A run inside the
	// canary is found by the documented hash (not by asking admission).
	first := ""
	for i := 0; first == ""; i++ {
		if run := fmt.Sprintf("run-%d", i); inCanary(serverID, classA, run, 5) {
			first = run
		}
	}
	r.moves(t, registryv1.Stage_STAGE_CANARY, r.statusReq(first), allow, "")
	if resp := r.check1(t, r.statusReq("")); resp.GetReason() != forbidden || !strings.HasPrefix(resp.GetDetail(), "canary: ") {
		t.Fatalf("canary, no run id: %v %q", resp.GetReason(), resp.GetDetail())
	}
	const runs = 10_000
	// The 10,000 runs (each a fresh run id, so a decision of its own) get a
	// bound of their own: under a loaded CI machine they took longer than
	// the test's 50 s (DeadlineExceeded at the last CI), which says nothing
	// about the rollout.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	type answer struct {
		status, label catalogv1.DecisionReason
		listed        map[string]bool
		detail        string
	}
	answers := make([]answer, runs)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < runs; i += 4 {
				run := fmt.Sprintf("run-%d", i)
				resp, err := r.alice.Check(ctx, r.statusReq(run))
				if err != nil {
					errs <- err
					return
				}
				a := answer{status: resp.GetReason(), detail: resp.GetDetail()}
				// The write tool and the list for every run inside and a
				// sample of those outside.
				if inCanary(serverID, classA, run, 5) || i%50 == 0 {
					lr, err := r.alice.Check(ctx, r.labelReq(run))
					if err != nil {
						errs <- err
						return
					}
					a.label = lr.GetReason()
					lv, err := r.alice.ListVisibleTools(ctx, &admissionv1.ListVisibleToolsRequest{RunId: run})
					if err != nil {
						errs <- err
						return
					}
					a.listed = map[string]bool{}
					for _, vt := range lv.GetTools() {
						a.listed[vt.GetRuntime().GetToolId()] = true
					}
				}
				answers[i] = a
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	allowed, labels, sampled := 0, 0, 0
	for i, a := range answers {
		run := fmt.Sprintf("run-%d", i)
		in := inCanary(serverID, classA, run, 5)
		switch {
		case in && a.status != allow:
			t.Fatalf("canary, %s inside: %v %q", run, a.status, a.detail)
		case !in && (a.status != forbidden || !strings.HasPrefix(a.detail, "canary: ")):
			t.Fatalf("canary, %s outside: %v %q", run, a.status, a.detail)
		}
		if a.status == allow {
			allowed++
		}
		if a.listed == nil {
			continue
		}
		sampled++
		if a.label != forbidden {
			t.Fatalf("canary, %s (inside %v): the write tool answered %v", run, in, a.label)
		}
		labels++
		if a.listed[labelID] || a.listed[toolID] != in || len(a.listed) > 1 {
			t.Fatalf("canary, %s (inside %v): listed %v", run, in, a.listed)
		}
	}
	share := float64(allowed) / runs
	sigma := math.Sqrt(0.05 * 0.95 / runs)
	t.Logf("canary 5 %%: %d of %d runs admitted (%.2f %%, %.1f σ from 5 %%); the write tool refused for all %d runs asked (%d sampled lists agree)",
		allowed, runs, 100*share, (share-0.05)/sigma, labels, sampled)
	if share < 0.035 || share > 0.065 {
		t.Fatalf("canary 5 %%: %.2f %% of runs admitted, want 3.5–6.5 %%", 100*share)
	}

	// FULL: every run, both tools.
	r.moves(t, registryv1.Stage_STAGE_FULL, r.statusReq(""), allow, "")
	for _, q := range []*admissionv1.CheckRequest{r.statusReq("run-1"), r.labelReq(""), r.labelReq("run-2")} {
		if resp := r.check1(t, q); resp.GetReason() != allow || resp.GetReceipt().GetGeneration() != r.generation {
			t.Fatalf("full, %s: %v %q (generation %d)", q.GetToolId(), resp.GetReason(), resp.GetDetail(), resp.GetReceipt().GetGeneration())
		}
	}
	if got := r.listed(t, ""); len(got) != 2 {
		t.Fatalf("full: listed %v, want both tools", got)
	}
}
