package admission

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/condition"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	admissionsvc "github.com/toolcrib/toolcrib/services/admission"
)

// The tools of the conditions world (issue 25's examples).
var (
	readFile = extraTool{name: "read_text_file", description: "Read a text file.", scope: "fs:read",
		schema: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`}
	refund = extraTool{name: "create_refund", description: "Create a refund.", scope: "refund:write",
		schema: `{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"]}`,
		effect: catalogv1.EffectClass_EFFECT_CLASS_WRITE}
	note = extraTool{name: "update_note", description: "Update a shipment's note.", scope: "note:write",
		effect: catalogv1.EffectClass_EFFECT_CLASS_WRITE}
)

// condWorld is the world with the three tools, grants with the issue's
// conditions, and one replica whose conditions read clock as request.time.
type condWorld struct {
	*world
	r          *replica
	clock      atomic.Pointer[time.Time]
	grantEpoch int64
}

func newCondWorld(t *testing.T) *condWorld {
	t.Helper()
	ctx := ctxFor(t)
	cw := &condWorld{world: newWorldWith(t, worldOptions{tools: []extraTool{readFile, refund, note}})}
	noon := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	cw.clock.Store(&noon)
	for _, g := range []*registryv1.GrantScopesRequest{
		{TenantId: tenantA, Group: "readers", Scopes: []string{readFile.scope}, AudienceClasses: []string{classA}, Condition: condition.PathExample},
		{TenantId: tenantA, Group: "support", Scopes: []string{refund.scope}, AudienceClasses: []string{classA}, Condition: condition.AmountExample},
		{TenantId: tenantA, Group: "writers", Scopes: []string{note.scope}, AudienceClasses: []string{classA}, Condition: condition.RunExample},
		{TenantId: tenantA, Group: "day-shift", Scopes: []string{note.scope}, AudienceClasses: []string{classA}, Condition: condition.WindowExample},
		// auditors' condition reads an argument the schema does not require:
		// without it (or of another type) the evaluation fails.
		{TenantId: tenantA, Group: "auditors", Scopes: []string{readFile.scope}, AudienceClasses: []string{classA}, Condition: `args.depth > 2`},
		// cost-owners read through an allow-listed token claim.
		{TenantId: tenantA, Group: "cost-owners", Scopes: []string{readFile.scope}, AudienceClasses: []string{classA}, Condition: claimCondition},
		// tenant-b's readers may read anything: it must never widen tenant-a's.
		{TenantId: tenantB, Group: "readers", Scopes: []string{readFile.scope}, Condition: "true"},
	} {
		resp, err := cw.st.Registry.GrantScopes(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		if g.GetTenantId() == tenantA {
			cw.grantEpoch = resp.GetPolicyEpoch()
		}
	}
	cw.r = cw.startReplicaWith(t, 5*time.Second, cw.redisPrefix, func(c *admissionsvc.Config) {
		c.ConditionClock = func() time.Time { return *cw.clock.Load() }
	})
	return cw
}

// call Checks tool with args as subject of tenant-a in groups.
func (cw *condWorld) call(t *testing.T, c admissionv1.AdmissionServiceClient, tool extraTool, args string, mode admissionv1.Mode, run string) *admissionv1.CheckResponse {
	t.Helper()
	id := serverID + "." + tool.name
	resp, err := c.Check(ctxFor(t), &admissionv1.CheckRequest{ToolId: id, Generation: cw.generation, DescriptorDigest: cw.digests[id],
		Arguments: []byte(args), Mode: mode, RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func wantReason(t *testing.T, what string, resp *admissionv1.CheckResponse, want catalogv1.DecisionReason, grant string) {
	t.Helper()
	if resp.GetReason() != want {
		t.Fatalf("%s: %v %q, want %v", what, resp.GetReason(), resp.GetDetail(), want)
	}
	switch want {
	case catalogv1.DecisionReason_DECISION_REASON_CONDITION_UNMET:
		if !strings.Contains(resp.GetDetail(), "grant "+grant+" ") {
			t.Fatalf("%s: the detail %q does not name grant %s", what, resp.GetDetail(), grant)
		}
		if resp.GetReceipt().GetAdmittingGrant() != "" {
			t.Fatalf("%s: a denial names an admitting grant", what)
		}
	case catalogv1.DecisionReason_DECISION_REASON_ALLOW:
		if got := resp.GetReceipt().GetAdmittingGrant(); got != grant {
			t.Fatalf("%s: the receipt's admitting grant is %q, want %q", what, got, grant)
		}
	}
}

const (
	cAllow   = catalogv1.DecisionReason_DECISION_REASON_ALLOW
	cUnmet   = catalogv1.DecisionReason_DECISION_REASON_CONDITION_UNMET
	cConfirm = catalogv1.DecisionReason_DECISION_REASON_CONFIRMATION_REQUIRED
	cBadArgs = catalogv1.DecisionReason_DECISION_REASON_ARGUMENTS_INVALID
	cAuto    = admissionv1.Mode_MODE_AUTONOMOUS
	cUserOK  = admissionv1.Mode_MODE_USER_CONFIRMED
)

// TestConditionExamplesThroughTheServices plays the four examples
// through the real registry, discovery and admission: each condition
// admits the calls it should (the receipt naming the grant) and refuses
// the others with CONDITION_UNMET naming the grant and never an input.
func TestConditionExamplesThroughTheServices(t *testing.T) {
	cw := newCondWorld(t)
	rita := cw.client(t, cw.r, "rita", tenantA, "readers")

	t.Run("path under /data/<tenant>/", func(t *testing.T) {
		wantReason(t, "own tenant", cw.call(t, rita, readFile, `{"path":"/data/tenant-a/report.txt"}`, cAuto, ""), cAllow, "group:readers")
		r := cw.call(t, rita, readFile, `{"path":"/data/tenant-b/secret-of-b.txt"}`, cAuto, "")
		wantReason(t, "another tenant's path", r, cUnmet, "group:readers")
		if strings.Contains(r.GetDetail(), "secret-of-b") || strings.Contains(r.GetDetail(), "/data/") {
			t.Fatalf("the detail echoes the arguments: %q", r.GetDetail())
		}
		wantReason(t, "dot-dot escape", cw.call(t, rita, readFile, `{"path":"/data/tenant-a/../tenant-b/x"}`, cAuto, ""), cUnmet, "group:readers")
		wantReason(t, "dot-dot at the end", cw.call(t, rita, readFile, `{"path":"/data/tenant-a/.."}`, cAuto, ""), cUnmet, "group:readers")
		wantReason(t, "invalid arguments come first", cw.call(t, rita, readFile, `{"path":7}`, cAuto, ""), cBadArgs, "")
	})

	t.Run("amount ≤ 500 unless finance-leads", func(t *testing.T) {
		sam := cw.confirmedClient(t, cw.r, "sam", tenantA, "support")
		fran := cw.confirmedClient(t, cw.r, "fran", tenantA, "support", "finance-leads")
		wantReason(t, "500", cw.call(t, sam, refund, `{"amount":500}`, cUserOK, ""), cAllow, "group:support")
		wantReason(t, "500.01", cw.call(t, sam, refund, `{"amount":500.01}`, cUserOK, ""), cUnmet, "group:support")
		wantReason(t, "9000 by a finance lead", cw.call(t, fran, refund, `{"amount":9000}`, cUserOK, ""), cAllow, "group:support")
		// The new order: a person is never asked to cConfirm a call that
		// would then be refused.
		wantReason(t, "autonomous over the limit", cw.call(t, sam, refund, `{"amount":9000}`, cAuto, ""), cUnmet, "group:support")
		wantReason(t, "autonomous within the limit", cw.call(t, sam, refund, `{"amount":20}`, cAuto, ""), cConfirm, "")
		wantReason(t, "autonomous, invalid arguments", cw.call(t, sam, refund, `{"amount":"lots"}`, cAuto, ""), cBadArgs, "")
	})

	t.Run("write tools only inside a declared run", func(t *testing.T) {
		wes := cw.confirmedClient(t, cw.r, "wes", tenantA, "writers")
		wantReason(t, "no run", cw.call(t, wes, note, `{"shipment_id":"s-1"}`, cUserOK, ""), cUnmet, "group:writers")
		wantReason(t, "a run", cw.call(t, wes, note, `{"shipment_id":"s-1"}`, cUserOK, "run-7"), cAllow, "group:writers")
	})

	t.Run("no side effects outside 07:00-19:00 UTC", func(t *testing.T) {
		dee := cw.confirmedClient(t, cw.r, "dee", tenantA, "day-shift")
		wantReason(t, "noon", cw.call(t, dee, note, `{"shipment_id":"s-1"}`, cUserOK, ""), cAllow, "group:day-shift")
		night := time.Date(2026, 12, 2, 22, 30, 0, 0, time.UTC)
		cw.clock.Store(&night)
		wantReason(t, "22:30", cw.call(t, dee, note, `{"shipment_id":"s-1"}`, cUserOK, ""), cUnmet, "group:day-shift")
		seven := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
		cw.clock.Store(&seven)
		wantReason(t, "07:00", cw.call(t, dee, note, `{"shipment_id":"s-1"}`, cUserOK, ""), cAllow, "group:day-shift")
		// Two grants give the scope: either condition admits.
		both := cw.confirmedClient(t, cw.r, "bo", tenantA, "writers", "day-shift")
		cw.clock.Store(&night)
		wantReason(t, "night inside a run", cw.call(t, both, note, `{"shipment_id":"s-1"}`, cUserOK, "run-1"), cAllow, "group:writers")
		// The first grant, in the policy's order (subject, group), whose
		// condition is false is named.
		wantReason(t, "night, no run", cw.call(t, both, note, `{"shipment_id":"s-1"}`, cUserOK, ""), cUnmet, "group:day-shift")
	})

	t.Run("an unconditional grant needs no condition", func(t *testing.T) {
		alice := cw.client(t, cw.r, "alice", tenantA, "readers")
		wantReason(t, "alice, another tenant's path", cw.call(t, alice, readFile, `{"path":"/etc/passwd"}`, cAuto, ""), cAllow, "")
	})
}

// TestConditionsAreNotCached: the decision cache keeps the condition-free
// part (its key: tenant, class, epoch, generation, pointer revision, tool,
// plan digest, the principal's scope-set digest over all its grants,
// mode, plan generation and epoch, canary run); the condition runs on
// every call. The same key answers ALLOW and CONDITION_UNMET in turn by
// the arguments alone, and two principals with one scope-set digest (sam;
// fran, in a group no grant names) get different answers; the L2 holds
// exactly that one key, and another replica answering from it still runs
// the condition.
func TestConditionsAreNotCached(t *testing.T) {
	cw := newCondWorld(t)
	sam := cw.confirmedClient(t, cw.r, "sam", tenantA, "support")
	fran := cw.confirmedClient(t, cw.r, "fran", tenantA, "support", "finance-leads")
	if n := cw.l2Keys(t); n != 0 {
		t.Fatalf("%d keys in a fresh L2", n)
	}
	for range 20 {
		wantReason(t, "small", cw.call(t, sam, refund, `{"amount":10}`, cUserOK, ""), cAllow, "group:support")
		wantReason(t, "large", cw.call(t, sam, refund, `{"amount":1000}`, cUserOK, ""), cUnmet, "group:support")
		wantReason(t, "large, finance lead", cw.call(t, fran, refund, `{"amount":1000}`, cUserOK, ""), cAllow, "group:support")
	}
	// All of them shared one cached condition-free decision.
	if n := cw.l2Keys(t); n != 1 {
		t.Fatalf("%d decision cache keys, want the one all these Checks share", n)
	}
	// A replica answering from that L2 entry still runs the condition.
	other := cw.startReplica(t, 5*time.Second)
	samB := cw.confirmedClient(t, other, "sam", tenantA, "support")
	wantReason(t, "large, from L2", cw.call(t, samB, refund, `{"amount":1000}`, cUserOK, ""), cUnmet, "group:support")
	wantReason(t, "small, from L2", cw.call(t, samB, refund, `{"amount":10}`, cUserOK, ""), cAllow, "group:support")
	if n := cw.l2Keys(t); n != 1 {
		t.Fatalf("%d decision cache keys after the second replica, want 1", n)
	}
}

// TestConditionWrittenIsCheckedWithPosition: a condition that does not
// parse, names an unknown variable or field, does not return a bool or
// costs too much is INVALID_ARGUMENT on `condition` with its line and
// column, and nothing is written (the epoch does not move).
func TestConditionWrittenIsCheckedWithPosition(t *testing.T) {
	cw := newCondWorld(t)
	ctx := ctxFor(t)
	for _, tc := range []struct{ name, cond, want string }{
		{"syntax", "args.path.startsWith(", "1:22: Syntax error"},
		{"unknown variable", `user.name == "x"`, "1:1: undeclared reference to 'user'"},
		{"unknown field of principal", `principal.email == "x"`, "1:1: undeclared reference to 'principal'"},
		{"not a bool", `principal.subject`, "1:1: " + condition.ProblemNotBool},
		{"type error", `principal.groups == "x"`, "1:18: found no matching overload"},
		{"cost", `args.a.all(x, args.b.all(y, args.c.all(z, x == y && y == z)))`, "1:1: " + condition.ProblemCost},
		{"too long", strings.Repeat("true && ", 600) + "true", condition.ProblemTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cw.st.Registry.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantA, Group: "readers", Condition: tc.cond})
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
			var got string
			for _, d := range status.Convert(err).Details() {
				if br, ok := d.(*errdetails.BadRequest); ok {
					for _, v := range br.GetFieldViolations() {
						if v.GetField() == "condition" {
							got = v.GetDescription()
						}
					}
				}
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("violation on condition %q, want prefix %q", got, tc.want)
			}
			if e := cw.epoch(t); e != cw.grantEpoch {
				t.Fatalf("a refused condition moved the epoch to %d (was %d)", e, cw.grantEpoch)
			}
		})
	}
	// A condition alone, on a grant that does not exist, is NOT_FOUND.
	_, err := cw.st.Registry.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantA, Group: "nobody", Condition: "true"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("a condition for a missing grant: %v, want NotFound", err)
	}
}

// TestConditionsNeverCrossTenants: tenant-b's grant to a group named like
// tenant-a's, with the condition `true`, never admits a tenant-a call, and
// a tenant-b principal never reaches tenant-a's tool.
func TestConditionsNeverCrossTenants(t *testing.T) {
	cw := newCondWorld(t)
	rita := cw.client(t, cw.r, "rita", tenantA, "readers")
	wantReason(t, "tenant-a reader, path of tenant-b", cw.call(t, rita, readFile, `{"path":"/data/tenant-b/x"}`, cAuto, ""), cUnmet, "group:readers")
	rob := cw.client(t, cw.r, "rob", tenantB, "readers")
	r := cw.call(t, rob, readFile, `{"path":"/data/tenant-b/x"}`, cAuto, "")
	if r.GetReason() != catalogv1.DecisionReason_DECISION_REASON_NOT_FOUND {
		t.Fatalf("tenant-b reader: %v %q, want NOT_FOUND", r.GetReason(), r.GetDetail())
	}
}

// TestListVisibleMarksConditionalTools: a tool whose only grants carry a
// condition is listed, marked conditional; one an unconditional grant
// gives is not marked.
func TestListVisibleMarksConditionalTools(t *testing.T) {
	cw := newCondWorld(t)
	ctx := ctxFor(t)
	for _, tc := range []struct {
		who         admissionv1.AdmissionServiceClient
		name        string
		conditional bool
	}{
		{cw.client(t, cw.r, "rita", tenantA, "readers"), "rita", true},
		{cw.client(t, cw.r, "alice", tenantA, "readers"), "alice", false},
	} {
		resp, err := tc.who.ListVisibleTools(ctx, &admissionv1.ListVisibleToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, vt := range resp.GetTools() {
			if vt.GetRuntime().GetToolId() == serverID+"."+readFile.name {
				found = true
				if vt.GetRuntime().GetConditional() != tc.conditional {
					t.Fatalf("%s: conditional %v, want %v", tc.name, vt.GetRuntime().GetConditional(), tc.conditional)
				}
			}
		}
		if !found {
			t.Fatalf("%s: read_text_file is not listed", tc.name)
		}
	}
}

// TestConditionChangeRacingChecks: Checks that the old condition admits
// run while the condition is replaced by one that refuses them. No ALLOW
// is decided at the new epoch or later, and the last ALLOW is within the
// revocation bound (1 s) of the commit.
func TestConditionChangeRacingChecks(t *testing.T) {
	cw := newCondWorld(t)
	ctx := ctxFor(t)
	rita := cw.client(t, cw.r, "rita", tenantA, "readers")
	wantReason(t, "before", cw.call(t, rita, readFile, `{"path":"/data/tenant-a/x"}`, cAuto, ""), cAllow, "group:readers")
	var (
		mu        sync.Mutex
		lastAllow time.Time
		bad       []string
		stop      atomic.Bool
		wg        sync.WaitGroup
		newEpoch  atomic.Int64
	)
	newEpoch.Store(1 << 62)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				id := serverID + "." + readFile.name
				resp, err := rita.Check(context.Background(), &admissionv1.CheckRequest{ToolId: id, Generation: cw.generation,
					DescriptorDigest: cw.digests[id], Arguments: []byte(`{"path":"/data/tenant-a/x"}`), Mode: cAuto})
				if err != nil {
					continue
				}
				if resp.GetReason() == cAllow {
					mu.Lock()
					if at := resp.GetReceipt().GetDecidedAt().AsTime(); at.After(lastAllow) {
						lastAllow = at
					}
					if resp.GetReceipt().GetPolicyEpoch() >= newEpoch.Load() {
						bad = append(bad, resp.GetReceipt().GetReceiptId())
					}
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	resp, err := cw.st.Registry.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantA, Group: "readers",
		Condition: `args.path.startsWith("/public/")`})
	if err != nil {
		t.Fatal(err)
	}
	newEpoch.Store(resp.GetPolicyEpoch())
	committed := cw.committedAt(t, tenantA, resp.GetPolicyEpoch())
	time.Sleep(1500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d ALLOWs decided at or after the new epoch %d, e.g. receipt %s", len(bad), resp.GetPolicyEpoch(), bad[0])
	}
	if lag := lastAllow.Sub(committed); lag > time.Second {
		t.Fatalf("last ALLOW %v after the commit", lag)
	}
	wantReason(t, "after", cw.call(t, rita, readFile, `{"path":"/data/tenant-a/x"}`, cAuto, ""), cUnmet, "group:readers")
	wantReason(t, "after, the new condition", cw.call(t, rita, readFile, `{"path":"/public/x"}`, cAuto, ""), cAllow, "group:readers")
}

// TestAdmittingGrantOutlivesTheDecision: the grant whose condition
// admitted a call is kept with the stored receipt: GetReceipt on another
// replica (which reads it from Postgres) names it as the Check's answer
// did, and a receipt a grant without a condition admitted names none.
func TestAdmittingGrantOutlivesTheDecision(t *testing.T) {
	cw := newCondWorld(t)
	ctx := ctxFor(t)
	other := cw.startReplica(t, 5*time.Second)
	for _, tc := range []struct {
		who, grant string
		tool       extraTool
		args       string
		groups     []string
	}{
		{"sam", "group:support", refund, `{"amount":20}`, []string{"support"}},
		{"rita", "group:readers", readFile, `{"path":"/data/tenant-a/r.txt"}`, []string{"readers"}},
		{"alice", "", readFile, `{"path":"/etc/hosts"}`, nil},
	} {
		mode := cAuto
		if tc.tool.effect != catalogv1.EffectClass_EFFECT_CLASS_UNSPECIFIED {
			mode = cUserOK
		}
		rc := cw.call(t, cw.confirmedClient(t, cw.r, tc.who, tenantA, tc.groups...), tc.tool, tc.args, mode, "")
		wantReason(t, tc.who, rc, cAllow, tc.grant)
		got, err := cw.client(t, other, tc.who, tenantA, tc.groups...).GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: rc.GetReceipt().GetReceiptId()})
		if err != nil {
			t.Fatalf("%s: GetReceipt on the other replica: %v", tc.who, err)
		}
		if g := got.GetReceipt().GetAdmittingGrant(); g != tc.grant || !proto.Equal(storedConfirmed(got.GetReceipt()), storedConfirmed(rc.GetReceipt())) {
			t.Fatalf("%s: the stored receipt names %q, want %q:\n got %v\nwant %v", tc.who, g, tc.grant, got.GetReceipt(), rc.GetReceipt())
		}
	}
}

// storedConfirmed is [stored] with confirmed_at to the microsecond too.
func storedConfirmed(r *admissionv1.Receipt) *admissionv1.Receipt {
	r = stored(r)
	if r.GetConfirmedAt() != nil {
		r.ConfirmedAt = timestamppb.New(r.GetConfirmedAt().AsTime().Truncate(time.Microsecond))
	}
	return r
}

// TestConditionEvaluationErrorFailsClosed: a condition that cannot be
// evaluated for a call (a missing argument key, a value of another type)
// never admits it: CONDITION_UNMET with a fixed, bounded detail naming the
// grant and none of the arguments; another grant whose condition holds
// still admits the call.
func TestConditionEvaluationErrorFailsClosed(t *testing.T) {
	cw := newCondWorld(t)
	ada := cw.client(t, cw.r, "ada", tenantA, "auditors")
	const failed = "the condition of grant group:auditors could not be evaluated (fail closed)"
	for _, tc := range []struct{ what, args string }{
		{"missing key", `{"path":"/srv/secret-path-1"}`},
		{"another type", `{"path":"/srv/secret-path-2","depth":"secret-depth"}`},
	} {
		r := cw.call(t, ada, readFile, tc.args, cAuto, "")
		wantReason(t, tc.what, r, cUnmet, "group:auditors")
		if r.GetDetail() != failed {
			t.Fatalf("%s: detail %q, want %q", tc.what, r.GetDetail(), failed)
		}
		if r.GetDecision() != admissionv1.Decision_DECISION_DENY || r.GetReceipt().GetReason() != cUnmet {
			t.Fatalf("%s: decision %v, receipt reason %v", tc.what, r.GetDecision(), r.GetReceipt().GetReason())
		}
	}
	wantReason(t, "the argument given", cw.call(t, ada, readFile, `{"path":"/srv/x","depth":3}`, cAuto, ""), cAllow, "group:auditors")
	wantReason(t, "the argument given, false", cw.call(t, ada, readFile, `{"path":"/srv/x","depth":2}`, cAuto, ""), cUnmet, "group:auditors")
	// In readers and auditors: auditors' error does not hide readers'
	// condition, which admits a path under /data/tenant-a/; when neither
	// admits, the first grant in the policy's order (auditors) is named.
	both := cw.client(t, cw.r, "bea", tenantA, "readers", "auditors")
	wantReason(t, "readers admit", cw.call(t, both, readFile, `{"path":"/data/tenant-a/x"}`, cAuto, ""), cAllow, "group:readers")
	r := cw.call(t, both, readFile, `{"path":"/srv/x"}`, cAuto, "")
	wantReason(t, "neither admits", r, cUnmet, "group:auditors")
	if r.GetDetail() != failed {
		t.Fatalf("neither admits: detail %q, want %q", r.GetDetail(), failed)
	}
}

// claimCondition reads the token claim `department`, which a replica
// started with --condition-claims department passes to conditions.
const claimCondition = `"department" in principal.claims && principal.claims["department"] == "finance" && !("level" in principal.claims)`

// TestConditionReadsAllowListedClaims: `principal.claims` holds the token
// claims admission's --condition-claims names, string values of at most
// 256 bytes, and nothing else: a claim outside the list (level) is absent
// even when the token carries it; a replica with no list passes none.
func TestConditionReadsAllowListedClaims(t *testing.T) {
	cw := newCondWorld(t)
	listed := cw.startReplicaWith(t, 5*time.Second, cw.redisPrefix, func(c *admissionsvc.Config) {
		c.ConditionClaims = "department, cost_center"
	})
	token := func(extra map[string]any) string {
		return cw.st.Auth.Token(t, principal.Claims{Subject: "cora", Tenant: tenantA, Groups: []string{"cost-owners"}, Extra: extra})
	}
	at := func(r *replica, tok string) admissionv1.AdmissionServiceClient {
		return admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, r.addr, tok))
	}
	const args = `{"path":"/srv/ledger"}`
	finance := token(map[string]any{"department": "finance", "level": "7"})
	wantReason(t, "finance, listed", cw.call(t, at(listed, finance), readFile, args, cAuto, ""), cAllow, "group:cost-owners")
	wantReason(t, "finance, no list", cw.call(t, at(cw.r, finance), readFile, args, cAuto, ""), cUnmet, "group:cost-owners")
	for what, extra := range map[string]map[string]any{
		"sales":          {"department": "sales"},
		"not a string":   {"department": []string{"finance"}},
		"over 256 bytes": {"department": "finance" + strings.Repeat(" ", principal.MaxConditionClaimBytes)},
		"no claim":       nil,
	} {
		wantReason(t, what, cw.call(t, at(listed, token(extra)), readFile, args, cAuto, ""), cUnmet, "group:cost-owners")
	}
}
