package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/discovery"
)

// seedCase is one of seed 004's admit() cases played against the real
// services: prepare changes the world (through the registry, discovery, the
// fixture source or the replica's links) and returns the principal and the
// request; the answer must become want within the propagation bound and,
// for an ALLOW, bind the world's generation, digest and epoch.
type seedCase struct {
	seed    string
	want    catalogv1.DecisionReason
	prepare func(t *testing.T, s *seedWorld) (admissionv1.AdmissionServiceClient, *admissionv1.CheckRequest)
	// last: the case moves the source to a new generation, so it runs after
	// the others (which plan against the world's generation).
	last bool
}

type seedWorld struct {
	*world
	ctx   context.Context
	rep   *replica
	epoch int64
}

// req is the world's plan for the tool: its generation and digest, the
// epoch seen, valid arguments, autonomous.
func (s *seedWorld) req() *admissionv1.CheckRequest {
	return &admissionv1.CheckRequest{ToolId: toolID, Generation: s.generation, DescriptorDigest: s.digest,
		PolicyEpoch: s.epoch, Arguments: []byte(`{"shipment_id":"s-1"}`), Mode: admissionv1.Mode_MODE_AUTONOMOUS}
}

func (s *seedWorld) alice(t *testing.T) admissionv1.AdmissionServiceClient {
	return s.client(t, s.rep, "alice", tenantA)
}

// withReq returns alice and the world's plan changed by f.
func withReq(f func(*admissionv1.CheckRequest)) func(*testing.T, *seedWorld) (admissionv1.AdmissionServiceClient, *admissionv1.CheckRequest) {
	return func(t *testing.T, s *seedWorld) (admissionv1.AdmissionServiceClient, *admissionv1.CheckRequest) {
		q := s.req()
		if f != nil {
			f(q)
		}
		return s.alice(t), q
	}
}

// TestSeed004AdmitThroughTheServices is seed 004's eleven admit() cases,
// each mapped to its reason, through the real AdmissionService (started by
// its own Run) over the real registry and discovery, Postgres and Redis.
// The seed's objects map onto the services as in the in-memory tables
// (decision.TestSeed004Admit, grpcapi.TestSeed004ThroughTheAPI): the seed's
// tool.enabled is the registry's kill switch; tool.version is the
// descriptor discovery proved at the source and tool.approvedVersion the
// one the owner approved; call.version is the plan's descriptor digest;
// policyValidUntilMs is the replica's freshness (its Watch streams);
// call.tenant the tenant of the audience class the request names; the
// actor is the verified token. The four invalid_input cases are malformed
// request fields (the principal and the clock are not the caller's to
// send): no descriptor digest, generation 0, no mode, arguments that are a
// JSON string instead of an object.
func TestSeed004AdmitThroughTheServices(t *testing.T) {
	ctx := ctxFor(t)
	w := newWorld(t)
	// carol reads the class but holds no scope (the seed's actor.scopes []).
	if _, err := w.st.Registry.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantA, Subject: "carol",
		AudienceClasses: []string{classA}}); err != nil {
		t.Fatal(err)
	}
	s := &seedWorld{world: w, ctx: ctx, rep: w.startReplica(t, 5*time.Second), epoch: w.epoch(t)}

	const (
		disabled     = catalogv1.DecisionReason_DECISION_REASON_DISABLED
		unreviewed   = catalogv1.DecisionReason_DECISION_REASON_UNREVIEWED
		staleSchema  = catalogv1.DecisionReason_DECISION_REASON_STALE_SCHEMA
		invalidInput = catalogv1.DecisionReason_DECISION_REASON_INVALID_INPUT
	)
	cases := []seedCase{
		{seed: "allow", want: allow, prepare: withReq(nil)},
		{seed: "enabled: false", want: disabled, prepare: func(t *testing.T, s *seedWorld) (admissionv1.AdmissionServiceClient, *admissionv1.CheckRequest) {
			if _, err := s.st.Registry.DisableTool(s.ctx, &registryv1.DisableToolRequest{ToolId: toolID, Reason: "seed 004"}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { // enabled again, and ALLOW again, for the cases after
				if _, err := s.st.Registry.EnableTool(s.ctx, &registryv1.EnableToolRequest{ToolId: toolID}); err != nil {
					t.Fatal(err)
				}
				s.epoch = s.world.epoch(t)
				eventually(t, s.ctx, s.alice(t), s.req(), allow)
			})
			return s.alice(t), s.req()
		}},
		{seed: "version 8, approved 7", want: unreviewed, last: true, prepare: func(t *testing.T, s *seedWorld) (admissionv1.AdmissionServiceClient, *admissionv1.CheckRequest) {
			// The source changes the descriptor; discovery proves a new
			// generation; the approval binds the old digest only. The plan
			// is still the old generation's (the seed's call.version 7).
			from := s.pointerRevision(t)
			if _, err := s.srv.Apply(fixture.Upsert(statusTool("Query the current status of a shipment, with its carrier."))); err != nil {
				t.Fatal(err)
			}
			key := discovery.PointerKey{ServerID: serverID, AudienceClass: classA}
			if _, err := s.st.Discovery.TriggerScan(s.ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: classA}); err != nil {
				t.Fatal(err)
			}
			got, err := discovery.WaitPointers(s.ctx, s.st.Discovery, from, []discovery.PointerKey{key}, func(p *discoveryv1.ActivePointer) bool {
				return p.GetGeneration() > s.generation
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("generation %d → %d", s.generation, got[key].GetGeneration())
			s.epoch = s.world.epoch(t)
			return s.alice(t), s.req()
		}},
		{seed: "call version 6", want: staleSchema, prepare: withReq(func(q *admissionv1.CheckRequest) {
			q.DescriptorDigest = "sha256:" + strings.Repeat("6", 64)
		})},
		{seed: "now = policyValidUntil", want: stalePolicy, prepare: func(t *testing.T, s *seedWorld) (admissionv1.AdmissionServiceClient, *admissionv1.CheckRequest) {
			// A replica of its own whose Watch streams stop delivering: its
			// freshness ends one window after the last heartbeat.
			r := s.startReplica(t, time.Second)
			c := s.client(t, r, "alice", tenantA)
			eventually(t, s.ctx, c, s.req(), allow)
			r.regLink.Freeze()
			r.discLink.Freeze()
			return c, s.req()
		}},
		{seed: "call tenant demo-b", want: forbidden, prepare: withReq(func(q *admissionv1.CheckRequest) { q.AudienceClass = tenantB + ".readers" })},
		{seed: "actor scopes []", want: forbidden, prepare: func(t *testing.T, s *seedWorld) (admissionv1.AdmissionServiceClient, *admissionv1.CheckRequest) {
			return s.client(t, s.rep, "carol", tenantA), s.req()
		}},
		{seed: "policyValidUntilMs undefined", want: invalidInput, prepare: withReq(func(q *admissionv1.CheckRequest) { q.DescriptorDigest = "" })},
		{seed: "policyValidUntilMs NaN", want: invalidInput, prepare: withReq(func(q *admissionv1.CheckRequest) { q.Generation = 0 })},
		{seed: "nowMs NaN", want: invalidInput, prepare: withReq(func(q *admissionv1.CheckRequest) { q.Mode = admissionv1.Mode_MODE_UNSPECIFIED })},
		{seed: "scopes a string", want: invalidInput, prepare: withReq(func(q *admissionv1.CheckRequest) { q.Arguments = []byte(`"shipment:readwrite"`) })},
	}
	if len(cases) != 11 {
		t.Fatalf("%d cases; the seed has eleven", len(cases))
	}
	run := func(tc seedCase) {
		t.Run(tc.seed, func(t *testing.T) {
			c, q := tc.prepare(t, s)
			resp := eventually(t, s.ctx, c, q, tc.want)
			rc := resp.GetReceipt()
			wantDecision := admissionv1.Decision_DECISION_DENY
			if tc.want == allow {
				wantDecision = admissionv1.Decision_DECISION_ALLOW
				if rc.GetGeneration() != s.generation || rc.GetDescriptorDigest() != s.digest || rc.GetPolicyEpoch() != s.epoch {
					t.Fatalf("the receipt does not bind generation %d, digest %s, epoch %d: %v", s.generation, s.digest, s.epoch, rc)
				}
			}
			if resp.GetDecision() != wantDecision || rc.GetDecision() != wantDecision || rc.GetReason() != tc.want ||
				rc.GetTenantId() != tenantA || rc.GetReceiptId() == "" {
				t.Fatalf("decision %v, receipt %v", resp.GetDecision(), rc)
			}
		})
	}
	for _, tc := range cases {
		if !tc.last {
			run(tc)
		}
	}
	for _, tc := range cases {
		if tc.last {
			run(tc)
		}
	}
}

// eventually checks until the answer's reason is want (changes propagate
// through the Watch streams) and returns that answer; it fails after 15 s
// with the last answer. An ALLOW is never accepted on the way to a denial
// once a denial was seen.
func eventually(t *testing.T, ctx context.Context, c admissionv1.AdmissionServiceClient, q *admissionv1.CheckRequest,
	want catalogv1.DecisionReason) *admissionv1.CheckResponse {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	denied := false
	for {
		resp, err := c.Check(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetReason() == want {
			return resp
		}
		if want != allow && resp.GetReason() == allow && denied {
			t.Fatalf("ALLOW after a denial on the way to %v", want)
		}
		denied = denied || resp.GetReason() != allow
		if time.Now().After(deadline) {
			t.Fatalf("want %v, still %v %q", want, resp.GetReason(), resp.GetDetail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pointerRevision is discovery's revision of the world's pointer now.
func (w *world) pointerRevision(t *testing.T) int64 {
	t.Helper()
	resp, err := w.st.Discovery.GetActiveSnapshot(context.Background(), &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID,
		AudienceClass: classA, ToolsPageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetPointer().GetRevision()
}
