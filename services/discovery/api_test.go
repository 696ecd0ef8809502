package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// violations returns the BadRequest fields of an InvalidArgument error.
func violations(t *testing.T, err error) []string {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", err)
	}
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	sort.Strings(fields)
	return fields
}

func reason(err error) string {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

func TestMalformedRequestsAreRefusedWhole(t *testing.T) {
	e := start(t, nil)
	ctx := ctxT(t)
	c := e.admin
	for _, tc := range []struct {
		name   string
		call   func() error
		fields []string
	}{
		{"trigger", func() error {
			_, err := c.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: "Bad Id", AudienceClass: "nodot"})
			return err
		}, []string{"audience_class", "server_id"}},
		{"snapshot", func() error {
			_, err := c.GetSnapshot(ctx, &discoveryv1.GetSnapshotRequest{ServerId: "s", ToolsPageSize: -1})
			return err
		}, []string{"audience_class", "generation", "tools_page_size"}},
		{"rollback", func() error {
			_, err := c.Rollback(ctx, &discoveryv1.RollbackRequest{ServerId: "s", AudienceClass: class, ExpectedGeneration: 2, ToGeneration: 5})
			return err
		}, []string{"to_generation"}},
		{"bind", func() error {
			_, err := c.BindGeneration(ctx, &discoveryv1.BindGenerationRequest{ServerId: "s", AudienceClass: class, Generation: 1,
				BoundUntil: timestamppb.New(time.Now().Add(48 * time.Hour))})
			return err
		}, []string{"bound_until", "run_id"}},
		{"runs", func() error {
			_, err := c.ListRuns(ctx, &discoveryv1.ListRunsRequest{PageSize: -1, PageToken: "garbage!", States: []catalogv1.DiscoveryState{99}})
			return err
		}, []string{"page_size", "page_token", "states"}},
		{"get run", func() error {
			_, err := c.GetRun(ctx, &discoveryv1.GetRunRequest{})
			return err
		}, []string{"run_id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := violations(t, tc.call()); !slices.Equal(got, tc.fields) {
				t.Fatalf("violations %v, want %v", got, tc.fields)
			}
		})
	}
	stream, err := c.Watch(ctx, &discoveryv1.WatchRequest{FromRevision: -1})
	if err == nil {
		_, err = stream.Recv()
	}
	if got := violations(t, err); !slices.Equal(got, []string{"from_revision"}) {
		t.Fatalf("watch violations %v", got)
	}
}

func TestAuthorizationAndTenantIsolation(t *testing.T) {
	e := start(t, nil)
	cat := discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...)
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	run := e.scanAndWait("inventory", class)
	ctx := ctxT(t)

	if _, err := e.client("").ListRuns(ctx, &discoveryv1.ListRunsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	alice := e.client(e.auth.User(t, "alice", tenant))
	if _, err := alice.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: "inventory"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("tenant user triggered a scan: %v", err)
	}
	if _, err := alice.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: "inventory", AudienceClass: class}); err != nil {
		t.Fatalf("own tenant: %v", err)
	}
	bob := e.client(e.auth.User(t, "bob", "tenant-b"))
	if _, err := bob.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: "inventory", AudienceClass: class}); status.Code(err) != codes.NotFound {
		t.Fatalf("other tenant read the pointer: %v", err)
	}
	if _, err := bob.GetRun(ctx, &discoveryv1.GetRunRequest{RunId: run.GetRunId()}); status.Code(err) != codes.NotFound {
		t.Fatalf("other tenant read the run: %v", err)
	}
	if runs, err := bob.ListRuns(ctx, &discoveryv1.ListRunsRequest{}); err != nil || len(runs.GetRuns()) != 0 {
		t.Fatalf("other tenant listed runs: %v %v", runs, err)
	}
	svc := e.client(e.auth.Service(t))
	if _, err := svc.BindGeneration(ctx, &discoveryv1.BindGenerationRequest{ServerId: "inventory", AudienceClass: class, Generation: 1,
		RunId: "agent-1", BoundUntil: timestamppb.New(time.Now().Add(time.Hour))}); err != nil {
		t.Fatalf("service bind: %v", err)
	}
}

func TestTriggerScanTickets(t *testing.T) {
	e := start(t, nil)
	release := make(chan struct{})
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(open)
	cat := discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...)
	cat.OnList = func(c *discoverytest.Catalog, call int, cursor *string, r *discoverytest.Reply) {
		r.Wait = release // hold every page until released
	}
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	e.bind("tenant-a.writers", "inventory", "env:"+envRef)
	ctx := ctxT(t)

	for _, req := range []*discoveryv1.TriggerScanRequest{{ServerId: "nope"}, {ServerId: "inventory", AudienceClass: "tenant-a.nope"}} {
		if _, err := e.admin.TriggerScan(ctx, req); status.Code(err) != codes.NotFound {
			t.Fatalf("%v: %v", req, err)
		}
	}
	e.reg.PutClass(&registryv1.AudienceClass{Name: "tenant-a.empty", TenantId: tenant})
	if _, err := e.admin.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: "inventory", AudienceClass: "tenant-a.empty"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("class not covering the server: %v", err)
	}
	first, err := e.admin.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: "inventory"})
	if err != nil || len(first.GetScans()) != 2 {
		t.Fatalf("scan as every class: %v %v", first, err)
	}
	// While the first scan of readers is in flight, the same pair is not
	// queued twice.
	e.wait(first.GetScans()[0].GetScanId(), func(r *discoveryv1.Run) bool { return true })
	again := e.scan("inventory", class)
	if !again.GetAlreadyQueued() || again.GetScanId() != first.GetScans()[0].GetScanId() {
		t.Fatalf("second trigger %v, first %v", again, first.GetScans()[0])
	}
	open()
	for _, tk := range first.GetScans() {
		want(t, e.wait(tk.GetScanId(), nil), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	}
	// Once finished, a new trigger queues a new scan.
	if tk := e.scan("inventory", class); tk.GetAlreadyQueued() || tk.GetScanId() == first.GetScans()[0].GetScanId() {
		t.Fatalf("trigger after the scan ended: %v", tk)
	}
}

// TestConcurrentTriggersOfOnePairQueueOneScan: TriggerScans of one pair
// from many callers at once (which share insert transactions) queue one
// scan: every ticket names it, and exactly one says it was not already
// queued.
func TestConcurrentTriggersOfOnePairQueueOneScan(t *testing.T) {
	e := start(t, nil)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	cat := discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...)
	cat.OnList = func(c *discoverytest.Catalog, call int, cursor *string, r *discoverytest.Reply) {
		r.Wait = release // hold the scan in flight
	}
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	ctx := ctxT(t)
	const callers = 24
	tickets := make([]*discoveryv1.ScanTicket, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			resp, err := e.admin.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: "inventory", AudienceClass: class})
			if err != nil || len(resp.GetScans()) != 1 {
				t.Errorf("trigger %d: %v %v", i, resp, err)
				return
			}
			tickets[i] = resp.GetScans()[0]
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	fresh := 0
	for _, tk := range tickets {
		if tk.GetScanId() != tickets[0].GetScanId() {
			t.Fatalf("two scans queued: %v and %v", tickets[0], tk)
		}
		if !tk.GetAlreadyQueued() {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d tickets say they queued the scan, want 1: %v", fresh, tickets)
	}
}

// watchChanges reads n changes from a stream, skipping heartbeats, and
// reports whether a heartbeat was seen.
func watchChanges(t *testing.T, stream discoveryv1.DiscoveryService_WatchClient, n int) ([]*discoveryv1.PointerChange, bool) {
	t.Helper()
	var out []*discoveryv1.PointerChange
	beat := false
	for len(out) < n {
		msg, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c := msg.GetChange(); c != nil {
			out = append(out, c)
		} else {
			beat = true
		}
	}
	return out, beat
}

func TestRollbackReceiptsAndWatch(t *testing.T) {
	e := start(t, nil)
	cat := discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...)
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	ctx := ctxT(t)
	stream, err := e.admin.Watch(ctx, &discoveryv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want(t, e.scanAndWait("inventory", class), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	cat.SetTools("r-2", discoverytest.Tools("y", 3)...)
	want(t, e.scanAndWait("inventory", class), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)

	if _, err := e.admin.Rollback(ctx, &discoveryv1.RollbackRequest{ServerId: "inventory", AudienceClass: class, ExpectedGeneration: 1}); status.Code(err) != codes.Aborted {
		t.Fatalf("stale expectation: %v", err)
	}
	rb, err := e.admin.Rollback(ctx, &discoveryv1.RollbackRequest{ServerId: "inventory", AudienceClass: class, ExpectedGeneration: 2, Reason: "tools missing"})
	if err != nil {
		t.Fatal(err)
	}
	if rb.GetPointer().GetGeneration() != 1 || rb.GetReceipt().GetMove() != catalogv1.PointerMove_POINTER_MOVE_ROLLBACK {
		t.Fatalf("rollback %v", rb)
	}
	if got := e.active("inventory", class); got.GetSnapshot().GetGeneration() != 1 || got.GetSnapshot().GetState() != eligible {
		t.Fatalf("after rollback: %v", got.GetPointer())
	}
	cl, err := e.admin.Rollback(ctx, &discoveryv1.RollbackRequest{ServerId: "inventory", AudienceClass: class, ExpectedGeneration: 1})
	if err != nil || cl.GetPointer().GetState() != discoveryv1.PointerState_POINTER_STATE_CLOSED {
		t.Fatalf("close: %v %v", cl, err)
	}
	closed := e.active("inventory", class)
	if closed.GetSnapshot() != nil || closed.GetPointer().GetState() != discoveryv1.PointerState_POINTER_STATE_CLOSED {
		t.Fatalf("a closed pointer served a snapshot: %v", closed)
	}
	if _, err := e.admin.Rollback(ctx, &discoveryv1.RollbackRequest{ServerId: "inventory", AudienceClass: class, ExpectedGeneration: 1}); status.Code(err) != codes.FailedPrecondition || reason(err) != "POINTER_CLOSED" {
		t.Fatalf("rollback of a closed pointer: %v", err)
	}

	changes, beat := watchChanges(t, stream, 4)
	moves := []catalogv1.PointerMove{}
	for i, c := range changes {
		if c.GetRevision() != int64(i+1) || c.GetPointer().GetRevision() != c.GetRevision() {
			t.Fatalf("change %d has revision %d", i, c.GetRevision())
		}
		moves = append(moves, c.GetReceipt().GetMove())
	}
	wantMoves := []catalogv1.PointerMove{catalogv1.PointerMove_POINTER_MOVE_ACTIVATE, catalogv1.PointerMove_POINTER_MOVE_ACTIVATE,
		catalogv1.PointerMove_POINTER_MOVE_ROLLBACK, catalogv1.PointerMove_POINTER_MOVE_CLOSE}
	if !slices.Equal(moves, wantMoves) {
		t.Fatalf("moves %v", moves)
	}
	if !beat {
		if _, beat = watchChanges(t, stream, 0); !beat {
			msg, err := stream.Recv()
			if err != nil || msg.GetHeartbeat() == nil || msg.GetHeartbeat().GetRevision() != 4 {
				t.Fatalf("heartbeat %v %v", msg, err)
			}
		}
	}
	// Resuming from revision 2 sends the rest only.
	resumed, err := e.admin.Watch(ctx, &discoveryv1.WatchRequest{FromRevision: 2})
	if err != nil {
		t.Fatal(err)
	}
	rest, _ := watchChanges(t, resumed, 2)
	if rest[0].GetRevision() != 3 || rest[1].GetRevision() != 4 {
		t.Fatalf("resumed %v", rest)
	}
	// A compacted revision is refused with REVISION_COMPACTED.
	pool, err := pgxpool.New(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "DELETE FROM discovery.changes WHERE revision <= 2"); err != nil {
		t.Fatal(err)
	}
	old, err := e.admin.Watch(ctx, &discoveryv1.WatchRequest{FromRevision: 1})
	if err == nil {
		_, err = old.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition || reason(err) != "REVISION_COMPACTED" {
		t.Fatalf("compacted watch: %v", err)
	}
	// A new proven scan reopens the closed pointer with generation 3.
	r := e.scanAndWait("inventory", class)
	want(t, r, eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	if r.GetGeneration() != 3 {
		t.Fatalf("reopened at %d", r.GetGeneration())
	}
}

func TestSnapshotToolPaging(t *testing.T) {
	e := start(t, nil)
	cat := discoverytest.NewCatalog("r-1", 10, discoverytest.Tools("x", 25)...)
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	want(t, e.scanAndWait("inventory", class), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	ctx := ctxT(t)
	first, err := e.admin.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: "inventory", AudienceClass: class, ToolsPageSize: 10})
	if err != nil || len(first.GetSnapshot().GetTools()) != 10 || first.GetNextToolsPageToken() == "" {
		t.Fatalf("first page: %v", err)
	}
	names := []string{}
	for _, tl := range first.GetSnapshot().GetTools() {
		names = append(names, tl.GetName())
	}
	token := first.GetNextToolsPageToken()
	for token != "" {
		page, err := e.admin.GetSnapshot(ctx, &discoveryv1.GetSnapshotRequest{ServerId: "inventory", AudienceClass: class, Generation: 1, ToolsPageSize: 10, ToolsPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range page.GetSnapshot().GetTools() {
			names = append(names, tl.GetName())
		}
		token = page.GetNextToolsPageToken()
	}
	if len(names) != 25 || names[24] != "x_24" {
		t.Fatalf("paged names %v", names)
	}
	cat.SetTools("r-2", discoverytest.Tools("y", 2)...)
	want(t, e.scanAndWait("inventory", class), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	if _, err := e.admin.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: "inventory", AudienceClass: class,
		ToolsPageSize: 10, ToolsPageToken: first.GetNextToolsPageToken()}); status.Code(err) != codes.Aborted {
		t.Fatalf("token of a replaced generation: %v", err)
	}
}

func TestWatchEndsWhenTheServerDrains(t *testing.T) {
	auth := servicetest.NewAuth(t)
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "discovery", Sets: discovery.Spec().Migrations})
	reg := newRegFake(t, auth)
	cfg, err := discovery.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Common = auth.Common(t, url, false, nil)
	cfg.RegistryAddr, cfg.NoAutoScans, cfg.WatchHeartbeat = reg.addr, true, 100*time.Millisecond
	cfg.Egress.AllowLoopback, cfg.Secrets.EnvPrefixes = true, envRef
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc, done := make(chan string, 1), make(chan error, 1)
	cfg.Listening = func(a string) { addrc <- a }
	go func() { done <- discovery.Run(ctx, cfg) }()
	addr := <-addrc
	servicetest.WaitServing(t, addr, 30*time.Second)
	c := discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, addr, auth.Admin(t)))
	stream, err := c.Watch(context.Background(), &discoveryv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := stream.Recv(); err != nil || msg.GetHeartbeat() == nil {
		t.Fatalf("first heartbeat: %v %v", msg, err)
	}
	cancel()
	for {
		_, err := stream.Recv()
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) || status.Code(err) != codes.Unavailable {
			t.Fatalf("watch ended with %v, want UNAVAILABLE", err)
		}
		break
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

func TestRetentionJobDeletesOnlyUnusedGenerations(t *testing.T) {
	e := start(t, func(c *discovery.Config) {
		c.SnapshotTTL, c.RetentionInterval, c.RetentionGrace = 700*time.Millisecond, 200*time.Millisecond, 0
	})
	cat := discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...)
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	for i := 1; i <= 3; i++ {
		cat.SetTools(fmt.Sprintf("r-%d", i), discoverytest.Tools(fmt.Sprintf("v%d", i), 2)...)
		want(t, e.scanAndWait("inventory", class), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	}
	if _, err := e.admin.BindGeneration(ctxT(t), &discoveryv1.BindGenerationRequest{ServerId: "inventory", AudienceClass: class,
		Generation: 2, RunId: "agent-run-7", BoundUntil: timestamppb.New(time.Now().Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	// Every snapshot expires within a second; generation 1 (retired,
	// unbound) goes, 2 (bound) and 3 (active) stay.
	servicetest.Eventually(t, 20*time.Second, "retention", func() bool {
		gens, err := e.admin.ListGenerations(ctxT(t), &discoveryv1.ListGenerationsRequest{ServerId: "inventory", AudienceClass: class})
		if err != nil {
			t.Fatal(err)
		}
		var nums []int64
		for _, g := range gens.GetGenerations() {
			nums = append(nums, g.GetGeneration())
		}
		return slices.Equal(nums, []int64{3, 2})
	})
	gens, _ := e.admin.ListGenerations(ctxT(t), &discoveryv1.ListGenerationsRequest{ServerId: "inventory", AudienceClass: class})
	if !gens.GetGenerations()[0].GetActive() || gens.GetGenerations()[1].GetBoundUntil() == nil {
		t.Fatalf("kept %v", gens.GetGenerations())
	}
}
