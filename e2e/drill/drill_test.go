// Package drill is the seed-004 acceptance drill (`make drill`): one
// read-only tool, two tenants, two schema versions of the tool and two
// admission replicas, one of which has its updates cut off, all through the
// real registry, discovery (its workers scanning a fixture MCP server),
// admission, Postgres and Redis. It prints one table (case, expected, got,
// replica, last ALLOW after the commit, request id, policy epoch), fails on
// any failed case, and keeps its inputs and results in TOOLCRIB_DRILL_DIR;
// TOOLCRIB_DRILL_INPUTS reruns it with kept inputs.
package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/stack"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	admissionsvc "github.com/toolcrib/toolcrib/services/admission"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/registry"
)

const (
	serverID = "inventory"
	tenantA  = "tenant-a"
	tenantB  = "tenant-b"
	classA   = "tenant-a.readers"
	toolName = "shipment_status"
	toolID   = serverID + "." + toolName
	scope    = "shipment:read"
)

// Inputs is everything the drill is run with; it is written to
// inputs.json and read back from TOOLCRIB_DRILL_INPUTS for a rerun.
type Inputs struct {
	// ToolV1 and ToolV2 are the two schema versions of the tool, as the
	// MCP server lists them.
	ToolV1 json.RawMessage `json:"tool_v1"`
	ToolV2 json.RawMessage `json:"tool_v2"`
	// Arguments of every Check.
	Arguments string `json:"arguments"`
	// ValidityWindowMS is each replica's --validity-window: the bound for
	// the cut-off replica, which must fail closed after it.
	ValidityWindowMS int `json:"validity_window_ms"`
	// ConnectedBoundMS is the promise for a connected replica: its last
	// ALLOW at most this long after the disable commits (DESIGN §9).
	ConnectedBoundMS int `json:"connected_bound_ms"`
	// HeartbeatMS is the registry's and discovery's Watch heartbeat.
	HeartbeatMS int `json:"heartbeat_ms"`
}

func defaultInputs() Inputs {
	return Inputs{
		ToolV1: json.RawMessage(`{"name":"shipment_status","description":"Query the current status of a shipment.",` +
			`"inputSchema":{"type":"object","properties":{"shipment_id":{"type":"string"}},"required":["shipment_id"]},` +
			`"annotations":{"readOnlyHint":true}}`),
		ToolV2: json.RawMessage(`{"name":"shipment_status","description":"Query the current status of a shipment, with its carrier.",` +
			`"inputSchema":{"type":"object","properties":{"shipment_id":{"type":"string"},"carrier":{"type":"string"}},"required":["shipment_id"]},` +
			`"annotations":{"readOnlyHint":true}}`),
		Arguments:        `{"shipment_id":"S-1"}`,
		ValidityWindowMS: 5000,
		ConnectedBoundMS: 1000,
		HeartbeatMS:      100,
	}
}

// Row is one line of the table.
type Row struct {
	Case     string `json:"case"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
	Replica  string `json:"replica"`
	// LastAllowMS is the last ALLOW's decision time minus the disable's
	// commit time, in ms; empty where it does not apply.
	LastAllowMS string `json:"last_allow_after_commit_ms"`
	RequestID   string `json:"request_id"`
	PolicyEpoch int64  `json:"policy_epoch"`
	Pass        bool   `json:"pass"`
}

type drill struct {
	t    *testing.T
	ctx  context.Context
	in   Inputs
	st   *stack.Stack
	srv  *fixture.Server
	rows []Row
}

func (d *drill) add(r Row) {
	d.rows = append(d.rows, r)
	if !r.Pass {
		d.t.Errorf("case %q on %s: expected %s, got %s", r.Case, r.Replica, r.Expected, r.Got)
	}
}

// replica is one admission replica with its own links to the registry and
// discovery, which the drill can cut.
type replica struct {
	name              string
	addr              string
	regLink, discLink *servicetest.Proxy
	alice, bob        admissionv1.AdmissionServiceClient
}

func TestSeed004Drill(t *testing.T) {
	if os.Getenv("TOOLCRIB_DRILL") == "" {
		t.Skip("the acceptance drill runs with `make drill` (TOOLCRIB_DRILL=1)")
	}
	in := defaultInputs()
	if p := os.Getenv("TOOLCRIB_DRILL_INPUTS"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &in); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	out := os.Getenv("TOOLCRIB_DRILL_DIR")
	if out == "" {
		out = t.TempDir()
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(out, "inputs.json"), in)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := &drill{t: t, ctx: ctx, in: in}
	defer d.report(out)
	d.run()
}

func (d *drill) run() {
	t, ctx, in := d.t, d.ctx, d.in
	hb := time.Duration(in.HeartbeatMS) * time.Millisecond
	// Every service speaks TLS, with mTLS between them (as `make run`).
	d.st = stack.Start(t, stack.Options{
		TLS:       true,
		Registry:  func(c *registry.Config) { c.WatchHeartbeat = hb },
		Discovery: func(c *discovery.Config) { c.Linger = 0; c.WatchHeartbeat = hb },
	})
	srv, err := fixture.New(fixture.Script{Name: serverID, Versioned: true, Tools: []fixture.Tool{fixture.MustRawTool(string(in.ToolV1))}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	d.srv = srv
	ep, err := srv.StartHTTP(fixture.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })

	reg := d.st.Registry
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range []string{tenantA, tenantB} {
		must(reg.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tn}}))
	}
	must(reg.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: serverID, Owner: tenantA + "/group:inventory-team",
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: ep.URL}},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		ScanInterval:   durationpb.New(time.Hour),
	}}))
	must(reg.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: classA, TenantId: tenantA, Servers: []*registryv1.AudienceServer{{ServerId: serverID}}}}))
	must(reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantA, Subject: "alice",
		Scopes: []string{scope}, AudienceClasses: []string{classA}}))
	// tenant-b's bob holds the same scope but no class reading the server.
	must(reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantB, Subject: "bob", Scopes: []string{scope}}))

	gen1, digest1 := d.scan(0)
	d.waitTool(digest1)
	pub, err := reg.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: toolID, Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: scope,
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT,
	}})
	if err != nil {
		t.Fatal(err)
	}
	must(reg.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: pub.GetTool().GetApprovalDigest()}))
	must(reg.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: toolID}))

	window := time.Duration(in.ValidityWindowMS) * time.Millisecond
	prefix := redistest.NewPrefix(t)
	reps := []*replica{d.startReplica("replica-1", window, prefix), d.startReplica("replica-2 (cut off)", window, prefix)}

	// 1. The approved version is callable on both replicas.
	for _, r := range reps {
		resp := d.until(r.alice, gen1, digest1, catalogv1.DecisionReason_DECISION_REASON_ALLOW, 10*time.Second)
		d.add(decisionRow("v1 approved: tenant-a calls it", "ALLOW", r, resp))
	}
	// 2. tenant-b cannot see or call tenant-a's tool, whatever it names.
	for _, r := range reps {
		resp := d.check(r.bob, gen1, digest1, "")
		d.add(decisionRow("tenant-b checks tenant-a's tool", "NOT_FOUND", r, resp))
		resp = d.check(r.bob, gen1, digest1, classA)
		d.add(decisionRow("tenant-b names tenant-a's class", "FORBIDDEN", r, resp))
		vis, err := r.bob.ListVisibleTools(ctx, &admissionv1.ListVisibleToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got := "absent"
		for _, v := range vis.GetTools() {
			if v.GetRuntime().GetToolId() == toolID {
				got = "listed"
			}
		}
		d.add(Row{Case: "tenant-b's visible set", Expected: "absent", Got: got, Replica: r.name, RequestID: "-",
			PolicyEpoch: vis.GetPolicyEpoch(), Pass: got == "absent"})
	}

	// 3. The second schema version arrives at the source: proven, active,
	// unreviewed, so it cannot be called.
	if _, err := srv.Apply(fixture.Upsert(fixture.MustRawTool(string(in.ToolV2)))); err != nil {
		t.Fatal(err)
	}
	gen2, digest2 := d.scan(gen1)
	if digest2 == digest1 {
		t.Fatalf("the second version has the first one's digest %s", digest1)
	}
	for _, r := range reps {
		resp := d.until(r.alice, gen2, digest2, catalogv1.DecisionReason_DECISION_REASON_UNREVIEWED, 10*time.Second)
		d.add(decisionRow("v2 unapproved: tenant-a calls it", "UNREVIEWED", r, resp))
	}
	// Approving v2 makes it callable (once the registry has taken it in).
	d.waitTool(digest2)
	tool, err := reg.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
	if err != nil {
		t.Fatal(err)
	}
	must(reg.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: tool.GetTool().GetApprovalDigest()}))
	for _, r := range reps {
		resp := d.until(r.alice, gen2, digest2, catalogv1.DecisionReason_DECISION_REASON_ALLOW, 10*time.Second)
		d.add(decisionRow("v2 approved: tenant-a calls it", "ALLOW", r, resp))
	}

	// 4. Cut replica-2 off from both streams, then disable the tool while
	// both replicas check continuously.
	reps[1].regLink.Sever()
	reps[1].discLink.Sever()
	type tally struct {
		lastAllow  time.Time
		lastAllowR *admissionv1.CheckResponse
		final      *admissionv1.CheckResponse
		allowAfter bool
		denied     bool
		err        error
	}
	tallies := make([]tally, len(reps))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tl := &tallies[i]
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := r.alice.Check(ctx, checkRequest(d.in, gen2, digest2, ""))
				if err != nil {
					tl.err = err
					return
				}
				tl.final = resp
				if resp.GetReason() == catalogv1.DecisionReason_DECISION_REASON_ALLOW {
					if tl.denied {
						tl.allowAfter = true
					}
					tl.lastAllow, tl.lastAllowR = resp.GetReceipt().GetDecidedAt().AsTime(), resp
				} else {
					tl.denied = true
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := reg.DisableTool(ctx, &registryv1.DisableToolRequest{ToolId: toolID, Reason: "seed-004 drill"}); err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	time.Sleep(window + 1500*time.Millisecond)
	close(stop)
	wg.Wait()
	committed := d.disableCommittedAt()

	bounds := []struct {
		want  catalogv1.DecisionReason
		bound time.Duration
	}{
		{catalogv1.DecisionReason_DECISION_REASON_DISABLED, time.Duration(in.ConnectedBoundMS) * time.Millisecond},
		{catalogv1.DecisionReason_DECISION_REASON_STALE_POLICY, window},
	}
	for i, r := range reps {
		tl, b := tallies[i], bounds[i]
		if tl.err != nil {
			t.Fatalf("%s: %v", r.name, tl.err)
		}
		after := tl.lastAllow.Sub(committed)
		got := reasonName(tl.final.GetReason()) + fmt.Sprintf(", last ALLOW %d ms after", after.Milliseconds())
		if tl.allowAfter {
			got += ", an ALLOW after a denial"
		}
		id := "-"
		if tl.lastAllowR != nil {
			id = tl.lastAllowR.GetReceipt().GetReceiptId()
		}
		d.add(Row{Case: "tool disabled: last ALLOW within the bound", Replica: r.name,
			Expected:    fmt.Sprintf("%s, last ALLOW <= %d ms after", reasonName(b.want), b.bound.Milliseconds()),
			Got:         got,
			LastAllowMS: fmt.Sprint(after.Milliseconds()), RequestID: id,
			PolicyEpoch: tl.final.GetReceipt().GetPolicyEpoch(),
			Pass:        tl.final.GetReason() == b.want && !tl.lastAllow.IsZero() && after <= b.bound && !tl.allowAfter,
		})
	}
}

// startReplica runs an admission replica reading the registry and
// discovery through its own links and waits until it is SERVING.
func (d *drill) startReplica(name string, window time.Duration, redisPrefix string) *replica {
	t := d.t
	r := &replica{name: name, regLink: servicetest.NewProxy(t, d.st.RegistryAddr), discLink: servicetest.NewProxy(t, d.st.DiscoveryAddr)}
	cfg := d.st.AdmissionConfig(t)
	cfg.RegistryAddr, cfg.DiscoveryAddr = r.regLink.Addr(), r.discLink.Addr()
	cfg.ValidityWindow = window
	cfg.ReceiptInterval = 10 * time.Millisecond
	r.addr = d.st.StartAdmission(t, cfg, d.st.PostgresURL, func(c *admissionsvc.Config) { c.RedisPrefix = redisPrefix })
	r.alice = admissionv1.NewAdmissionServiceClient(d.st.Auth.Dial(t, r.addr, d.st.Auth.User(t, "alice", tenantA)))
	r.bob = admissionv1.NewAdmissionServiceClient(d.st.Auth.Dial(t, r.addr, d.st.Auth.User(t, "bob", tenantB)))
	return r
}

// scan scans tenant-a's class and returns the active generation past
// after and the tool's descriptor digest in it.
func (d *drill) scan(after int64) (int64, string) {
	t, ctx := d.t, d.ctx
	if _, err := d.st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: classA}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		active, err := d.st.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: classA})
		if err == nil && active.GetPointer().GetGeneration() > after {
			for _, tl := range active.GetSnapshot().GetTools() {
				if tl.GetToolId() == toolID {
					return active.GetPointer().GetGeneration(), tl.GetDescriptorDigest()
				}
			}
			t.Fatalf("generation %d has no %s", active.GetPointer().GetGeneration(), toolID)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no active generation past %d: %v", after, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitTool waits until the registry learned the tool at digest.
func (d *drill) waitTool(digest string) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := d.st.Registry.GetTool(d.ctx, &registryv1.GetToolRequest{ToolId: toolID})
		if err == nil && resp.GetTool().GetDescriptorDigest() == digest {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("the registry did not learn %s at %s: %v", toolID, digest, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func checkRequest(in Inputs, gen int64, digest, class string) *admissionv1.CheckRequest {
	return &admissionv1.CheckRequest{ToolId: toolID, Generation: gen, DescriptorDigest: digest, Arguments: []byte(in.Arguments),
		Mode: admissionv1.Mode_MODE_AUTONOMOUS, AudienceClass: class}
}

func (d *drill) check(c admissionv1.AdmissionServiceClient, gen int64, digest, class string) *admissionv1.CheckResponse {
	resp, err := c.Check(d.ctx, checkRequest(d.in, gen, digest, class))
	if err != nil {
		d.t.Fatal(err)
	}
	return resp
}

// until checks until the answer is want (the replica has caught up with
// the change just made) or within passes; it returns the last answer, which
// the row then shows. Waiting for a denial, an ALLOW on the way is returned
// at once: it is the failure the case is about.
func (d *drill) until(c admissionv1.AdmissionServiceClient, gen int64, digest string, want catalogv1.DecisionReason, within time.Duration) *admissionv1.CheckResponse {
	deadline := time.Now().Add(within)
	for {
		resp := d.check(c, gen, digest, "")
		allowed := resp.GetReason() == catalogv1.DecisionReason_DECISION_REASON_ALLOW
		if resp.GetReason() == want || (allowed && want != catalogv1.DecisionReason_DECISION_REASON_ALLOW) || time.Now().After(deadline) {
			return resp
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// disableCommittedAt returns when the registry committed the tool's
// disable, from its Watch stream.
func (d *drill) disableCommittedAt() time.Time {
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	st, err := d.st.Registry.Watch(ctx, &registryv1.WatchRequest{})
	if err != nil {
		d.t.Fatal(err)
	}
	var at time.Time
	for {
		msg, err := st.Recv()
		if err != nil {
			d.t.Fatalf("reading the registry's log: %v", err)
		}
		if tl := msg.GetChange().GetTool(); tl.GetToolId() == toolID && !tl.GetEnabled() && tl.GetDisabledReason() != "" {
			at = msg.GetChange().GetCommittedAt().AsTime()
		}
		if msg.GetHeartbeat() != nil {
			if at.IsZero() {
				d.t.Fatal("the registry's log has no disable of the tool")
			}
			return at
		}
	}
}

func decisionRow(name, want string, r *replica, resp *admissionv1.CheckResponse) Row {
	got := reasonName(resp.GetReason())
	return Row{Case: name, Expected: want, Got: got, Replica: r.name, RequestID: resp.GetReceipt().GetReceiptId(),
		PolicyEpoch: resp.GetReceipt().GetPolicyEpoch(), Pass: got == want}
}

func reasonName(r catalogv1.DecisionReason) string {
	return strings.TrimPrefix(r.String(), "DECISION_REASON_")
}

// report prints the table and keeps it, with the rows as JSON, in dir.
func (d *drill) report(dir string) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CASE\tEXPECTED\tGOT\tREPLICA\tLAST ALLOW AFTER COMMIT (MS)\tREQUEST ID\tPOLICY EPOCH\tRESULT")
	failed := 0
	for _, r := range d.rows {
		res := "pass"
		if !r.Pass {
			res, failed = "FAIL", failed+1
		}
		ms := r.LastAllowMS
		if ms == "" {
			ms = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Case, r.Expected, r.Got, r.Replica, ms, r.RequestID, r.PolicyEpoch, res)
	}
	w.Flush()
	fmt.Fprintf(&b, "drill: %d cases, %d failed; inputs and results in %s\n", len(d.rows), failed, dir)
	fmt.Print(b.String())
	if err := os.WriteFile(filepath.Join(dir, "table.txt"), []byte(b.String()), 0o644); err != nil {
		d.t.Error(err)
	}
	writeJSON(d.t, filepath.Join(dir, "results.json"), d.rows)
}

func writeJSON(t *testing.T, path string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
