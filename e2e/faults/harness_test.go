package faults_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/oracle"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/faultreport"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

const (
	tenant = "tenant-a"
	class  = "tenant-a.readers"

	eligible    = catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE
	proven      = catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN
	unversioned = catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION
	incomplete  = catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE
	quarantined = catalogv1.DiscoveryState_DISCOVERY_STATE_QUARANTINED
	retired     = catalogv1.DiscoveryState_DISCOVERY_STATE_RETIRED

	serverProvided = registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED
	noRevision     = registryv1.RevisionSource_REVISION_SOURCE_NONE

	noReason = discoveryv1.RunReason_RUN_REASON_UNSPECIFIED
)

// TestMain doubles as a discovery worker process for
// TestDiscoveryKilledMidPaginationIsRetriedElsewhere
// (discoverytest.StartChild) and removes the stdio fixture binary.
func TestMain(m *testing.M) {
	if discoverytest.RunChild() {
		return
	}
	code := m.Run()
	if stdioDir != "" {
		_ = os.RemoveAll(stdioDir)
	}
	os.Exit(code)
}

// The stdio fixture binary (e2e/cmd/mcpfixture), built once per test
// binary and removed by TestMain.
var (
	stdioOnce sync.Once
	stdioDir  string
	stdioBin  string
	stdioErr  error
)

func stdioFixture(t *testing.T) string {
	t.Helper()
	stdioOnce.Do(func() {
		stdioDir, stdioErr = os.MkdirTemp("", "toolcrib-faults-stdio-")
		if stdioErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			stdioBin, stdioErr = fixture.BuildCommand(ctx, stdioDir)
		}
	})
	if stdioErr != nil {
		t.Fatal(stdioErr)
	}
	return stdioBin
}

// env is one discovery service under test (its real Run: gRPC API, River
// workers on real Postgres) and the registry it reads.
type env struct {
	t       *testing.T
	auth    *servicetest.Auth
	dbURL   string
	reg     *discoverytest.Registry // nil with the real registry
	regAddr string
	addr    string
	admin   discoveryv1.DiscoveryServiceClient
}

// envOptions change how a discovery service under test is started.
type envOptions struct {
	// auth is the identity provider; nil makes one.
	auth *servicetest.Auth
	// registryAddr and reg point discovery at a running registry (the real
	// one, reg nil; or the fake of another worker set); "" starts a fake
	// registry.
	registryAddr string
	reg          *discoverytest.Registry
	// dbURL shares a database with another worker set; "" creates one.
	dbURL string
	// configure adjusts the configuration.
	configure func(*discovery.Config)
}

// secrets are the upstream credentials classes refer to (`env:NAME`).
var secrets = map[string]string{
	"FAULTS_UPSTREAM":          "faults-upstream-token",
	"FAULTS_UPSTREAM_TENANT_A": "token-of-tenant-a",
	"FAULTS_UPSTREAM_TENANT_B": "token-of-tenant-b",
}

// startDiscovery runs discovery in this process until the test ends, with
// scans driven by the test (no periodic refresh, no registry watch).
func startDiscovery(t *testing.T, o envOptions) *env {
	t.Helper()
	e := &env{t: t, auth: o.auth, dbURL: o.dbURL, reg: o.reg, regAddr: o.registryAddr}
	if e.auth == nil {
		e.auth = servicetest.NewAuth(t)
	}
	if e.dbURL == "" {
		e.dbURL = pgtest.NewDatabase(t, pgtest.Schema{Name: "discovery", Sets: discovery.Spec().Migrations})
	}
	if e.regAddr == "" {
		e.reg, e.regAddr = discoverytest.StartRegistry(t, e.auth)
		e.reg.AddTenant(tenant)
	}
	cfg, err := discovery.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Common = e.auth.Common(t, e.dbURL, false, nil)
	cfg.RegistryAddr = e.regAddr
	cfg.NoAutoScans = true
	cfg.Workers = 4
	cfg.RetryBase, cfg.RetryMax = 100*time.Millisecond, time.Second
	cfg.Linger = 500 * time.Millisecond
	cfg.WatchHeartbeat = 200 * time.Millisecond
	cfg.PageTimeout, cfg.ConnectTimeout = 20*time.Second, 20*time.Second
	cfg.LookupEnv = func(k string) (string, bool) { v, ok := secrets[k]; return v, ok }
	// The fixtures listen on loopback; every secret is FAULTS_….
	cfg.Egress.AllowLoopback, cfg.Secrets.EnvPrefixes = true, "FAULTS_"
	if o.configure != nil {
		o.configure(&cfg)
	}
	e.addr = servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Listening = listening
		return discovery.Run(ctx, c)
	})
	e.admin = discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, e.addr, e.auth.Admin(t)))
	return e
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// register adds a server to the fake registry and binds it to class with
// the default credential.
func (e *env) register(id string, transport *registryv1.Server, src registryv1.RevisionSource, pin string) {
	e.t.Helper()
	s := &registryv1.Server{ServerId: id, Owner: "team", TrustLevel: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: src, IdentityPin: pin, ScanInterval: durationpb.New(time.Hour)}
	switch tr := transport.GetTransport().(type) {
	case *registryv1.Server_StreamableHttp:
		s.Transport = tr
	case *registryv1.Server_Stdio:
		s.Transport = tr
	}
	e.reg.PutServer(s)
	e.bind(class, tenant, id, "env:FAULTS_UPSTREAM")
}

// overHTTP is the transport of a streamable HTTP server at url.
func overHTTP(url string) *registryv1.Server {
	return &registryv1.Server{Transport: &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: url}}}
}

// overStdio is the transport of a stdio server.
func overStdio(args []string) *registryv1.Server {
	return &registryv1.Server{Transport: &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: args[0], Args: args[1:]}}}
}

// bind adds (or re-points) a server binding of a class of tenantID.
func (e *env) bind(className, tenantID, server, ref string) {
	e.reg.AddTenant(tenantID)
	c := e.reg.Class(className)
	if c == nil {
		c = &registryv1.AudienceClass{Name: className, TenantId: tenantID}
	}
	i := slices.IndexFunc(c.Servers, func(b *registryv1.AudienceServer) bool { return b.ServerId == server })
	if i >= 0 {
		c.Servers[i].SecretRef = ref
	} else {
		c.Servers = append(c.Servers, &registryv1.AudienceServer{ServerId: server, SecretRef: ref})
	}
	e.reg.PutClass(c)
}

// scan triggers a scan of (server, class) and returns its id.
func (e *env) scan(server, className string) string {
	e.t.Helper()
	resp, err := e.admin.TriggerScan(ctxT(e.t), &discoveryv1.TriggerScanRequest{ServerId: server, AudienceClass: className})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.GetScans()[0].GetScanId()
}

// wait waits for a run of the scan satisfying done (nil: it ended in a
// state that is not retried).
func (e *env) wait(scanID string, done func(*discoveryv1.Run) bool) *discoveryv1.Run {
	e.t.Helper()
	r, err := discovery.WaitScan(ctxT(e.t), e.admin, scanID, done)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// attempt matches the finished run of attempt n.
func attempt(n int32) func(*discoveryv1.Run) bool {
	return func(r *discoveryv1.Run) bool { return discovery.Terminal(r) && r.GetAttempt() == n }
}

// runs returns every run of a scan, first attempt first.
func (e *env) runs(scanID string) []*discoveryv1.Run {
	e.t.Helper()
	resp, err := e.admin.ListRuns(ctxT(e.t), &discoveryv1.ListRunsRequest{ScanId: scanID, PageSize: 500})
	if err != nil {
		e.t.Fatal(err)
	}
	runs := resp.GetRuns()
	slices.SortFunc(runs, func(a, b *discoveryv1.Run) int { return int(a.GetAttempt() - b.GetAttempt()) })
	return runs
}

// run returns one run with its pages and flags.
func (e *env) run(id string) *discoveryv1.Run {
	e.t.Helper()
	resp, err := e.admin.GetRun(ctxT(e.t), &discoveryv1.GetRunRequest{RunId: id, IncludePages: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.GetRun()
}

// want fails unless the run ended in state with reason.
func want(t *testing.T, r *discoveryv1.Run, state catalogv1.DiscoveryState, reason discoveryv1.RunReason) {
	t.Helper()
	if r.GetState() != state || r.GetReason() != reason || !discovery.Terminal(r) {
		t.Fatalf("run %s (attempt %d): %v %v (%s), want %v %v", r.GetRunId(), r.GetAttempt(), r.GetState(), r.GetReason(), r.GetDetail(), state, reason)
	}
}

// active returns the active pointer and snapshot of a pair; nil when none
// was ever committed.
func (e *env) active(server, className string) *discoveryv1.GetActiveSnapshotResponse {
	e.t.Helper()
	resp, err := e.admin.GetActiveSnapshot(ctxT(e.t), &discoveryv1.GetActiveSnapshotRequest{ServerId: server, AudienceClass: className})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// generations returns a pair's generations, newest first.
func (e *env) generations(server, className string) []*discoveryv1.Generation {
	e.t.Helper()
	resp, err := e.admin.ListGenerations(ctxT(e.t), &discoveryv1.ListGenerationsRequest{ServerId: server, AudienceClass: className})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.GetGenerations()
}

// onlyGenerationsFrom fails unless the pair's generations were committed by
// exactly the given runs, in order: no other run activated anything.
func (e *env) onlyGenerationsFrom(server, className string, runs ...*discoveryv1.Run) {
	e.t.Helper()
	var got, want []string
	for _, g := range slices.Backward(e.generations(server, className)) {
		snap, err := e.admin.GetSnapshot(ctxT(e.t), &discoveryv1.GetSnapshotRequest{ServerId: server, AudienceClass: className, Generation: g.GetGeneration()})
		if err != nil {
			e.t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%s", g.GetGeneration(), snap.GetSnapshot().GetRunId()))
	}
	for i, r := range runs {
		want = append(want, fmt.Sprintf("%d:%s", i+1, r.GetRunId()))
	}
	if !slices.Equal(got, want) {
		e.t.Fatalf("generations (number:run) %v, want %v: a run that did not prove its catalog activated one", got, want)
	}
}

// failsOnceThenProves waits for a scan whose first attempt meets a one-off
// fault: attempt 1 ends INCOMPLETE with reason and activates nothing;
// attempt 2 proves the whole catalog and commits generation 1; the oracle
// judges both scans in the fixture's log the same way. It returns the two
// runs.
func (e *env) failsOnceThenProves(t *testing.T, scanID, server string, s *fixture.Server, reason discoveryv1.RunReason) (first, final *discoveryv1.Run) {
	t.Helper()
	first = e.wait(scanID, attempt(1))
	want(t, first, incomplete, reason)
	final = e.wait(scanID, nil)
	want(t, final, eligible, noReason)
	if first.GetGeneration() != 0 || final.GetAttempt() != 2 || final.GetGeneration() != 1 {
		t.Fatalf("the faulty attempt committed generation %d; the retry was attempt %d committing generation %d, want attempt 2 committing 1",
			first.GetGeneration(), final.GetAttempt(), final.GetGeneration())
	}
	e.onlyGenerationsFrom(server, class, final)
	events := s.Log().Events()
	e.checkWhole(t, server, class, events)
	scans := scanLogs(events)
	if len(scans) != 2 {
		t.Fatalf("%d scans in the fixture's log, want 2", len(scans))
	}
	agrees(t, first, judge(t, scans[0], serverProvided))
	agrees(t, final, judge(t, scans[1], serverProvided))
	return first, final
}

// checkWhole asserts that the active snapshot of a pair is ELIGIBLE and
// holds exactly the catalog the fixture had at the proven source revision
// (names, order, raw JSON and descriptor digests), and records
// partial_activated. events is the fixture's log.
func (e *env) checkWhole(t *testing.T, server, className string, events []fixture.Event) *catalogv1.Snapshot {
	t.Helper()
	resp := e.active(server, className)
	if resp == nil {
		t.Fatalf("nothing active for %s/%s", server, className)
	}
	snap := resp.GetSnapshot()
	var state *fixture.Event
	for i, ev := range events {
		if ev.Kind == fixture.EventState && ev.Revision == snap.GetSourceRevision() {
			state = &events[i]
		}
	}
	var why string
	switch {
	case snap.GetState() != eligible:
		why = fmt.Sprintf("the active snapshot is %v, not ELIGIBLE", snap.GetState())
	case state == nil:
		why = fmt.Sprintf("no fixture state has revision %q", snap.GetSourceRevision())
	default:
		var got, want []string
		for _, tool := range snap.GetTools() {
			got = append(got, tool.GetName()+"="+tool.GetDescriptorDigest()+"="+string(tool.GetRaw()))
		}
		for _, tool := range state.Tools {
			want = append(want, tool.Name()+"="+digestOf(t, tool)+"="+string(tool.JSON()))
		}
		if !slices.Equal(got, want) {
			why = fmt.Sprintf("active tools %v, the whole catalog at %s is %v", got, snap.GetSourceRevision(), want)
		}
	}
	partial := int64(0)
	if why != "" {
		partial = 1
	}
	faultreport.Add(t, faultreport.PartialActivated, partial)
	if why != "" {
		t.Fatalf("%s/%s generation %d is not the whole catalog: %s", server, className, snap.GetGeneration(), why)
	}
	return snap
}

// scanLogs splits a fixture log into the scans in it: each starts at a
// session (initialize or server/discover) and is preceded by the catalog
// state current then, as the oracle wants it.
func scanLogs(events []fixture.Event) [][]fixture.Event {
	var out [][]fixture.Event
	var state *fixture.Event
	for i, ev := range events {
		if ev.Kind == fixture.EventSession {
			seg := []fixture.Event{}
			if state != nil {
				seg = append(seg, *state)
			}
			out = append(out, seg)
		}
		if ev.Kind == fixture.EventState {
			state = &events[i]
		}
		if len(out) > 0 {
			out[len(out)-1] = append(out[len(out)-1], ev)
		}
	}
	return out
}

// digestOf is the descriptor digest of a fixture tool.
func digestOf(t *testing.T, tool fixture.Tool) string {
	t.Helper()
	d, err := canonical.Digest(tool.JSON())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// discoveryLimits are the caps of a discovery service with the default
// configuration, as the oracle takes them.
func discoveryLimits(t *testing.T) oracle.Limits {
	t.Helper()
	c, err := discovery.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return oracle.Limits{MaxPages: c.MaxPages, MaxTools: c.MaxTools, MaxBytes: int64(c.MaxBytes),
		MaxSchemaBytes: c.MaxSchemaBytes, MaxToolBytes: c.MaxToolBytes, MaxSchemaDepth: c.MaxSchemaDepth}
}

// judge asks the oracle what the scan in events must end with, for a
// discovery service with the default caps.
func judge(t *testing.T, events []fixture.Event, src registryv1.RevisionSource) oracle.Outcome {
	t.Helper()
	out, err := oracle.Expect(events, oracle.Config{RevisionSource: src, Limits: discoveryLimits(t)})
	if err != nil {
		t.Fatalf("the oracle cannot judge the scan: %v", err)
	}
	return out
}

// agrees fails unless a run ended as the oracle says its scan must: the
// committed state (ELIGIBLE for a proven scan) and the reason.
func agrees(t *testing.T, r *discoveryv1.Run, want oracle.Outcome) {
	t.Helper()
	if r.GetState() != want.CommittedState() || r.GetReason() != want.Reason {
		t.Fatalf("run %s (attempt %d) ended %v %v (%s); the oracle says %s (%s)", r.GetRunId(), r.GetAttempt(),
			r.GetState(), r.GetReason(), r.GetDetail(), want, want.Detail)
	}
}

// names lists the names of a snapshot's tools, comma-separated.
func names(tools []*catalogv1.ToolDescriptor) string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.GetName()
	}
	return strings.Join(out, ",")
}
