package discovery_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
	"github.com/toolcrib/toolcrib/services/discovery/internal/scan"
)

// metric returns the value of a counter or gauge (the sum over the label
// values matching labels) from a registry.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// TestNotificationStormIsRateLimited: a server that sends
// `notifications/tools/list_changed` (three) after every scan, its catalog never
// changing (the storm that made discovery rescan one server 1,605 times in
// 2.5 minutes). The notification-triggered scans are coalesced and backed
// off: each starts at least NotifyMinInterval (1 s) after the previous
// one, doubled for every one before it that found the same revision and
// page root — so the three the test waits for start at about 0, 2 and 6 s,
// the gaps at least 2 s and 4 s (a storm left unbounded would start
// hundreds). Every one ends UNCHANGED, the runs record the notifications
// held back and the delay, and
// toolcrib_discovery_suppressed_notifications_total counts them.
func TestNotificationStormIsRateLimited(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := start(t, func(c *discovery.Config) { c.Metrics = reg })
	cat := discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...)
	var srv *discoverytest.HTTPServer
	cat.OnList = func(_ *discoverytest.Catalog, call int, _ *string, _ *discoverytest.Reply) {
		// Every scan lists twice (the page, then the closing re-check);
		// right after the re-check, the server says three times that its
		// list changed (the go-sdk debounces sends by 10 ms), and, after
		// a notification-triggered scan, once more 400 ms later (past
		// discovery's debounce, while the next scan waits out its rate
		// limit of at least 1 s).
		if call%2 == 1 {
			go func() {
				for range 3 {
					time.Sleep(15 * time.Millisecond)
					srv.Notify()
				}
				if call >= 3 {
					time.Sleep(400 * time.Millisecond)
					srv.Notify()
				}
			}()
		}
	}
	srv = discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e.register("storm", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	want(t, e.scanAndWait("storm", class), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	began := time.Now()
	notifiedRuns := func() []*discoveryv1.Run {
		var out []*discoveryv1.Run
		for _, r := range e.runsOf("storm", class) {
			if r.GetTrigger() == discoveryv1.ScanTrigger_SCAN_TRIGGER_LIST_CHANGED {
				out = append(out, r)
			}
		}
		slices.SortFunc(out, func(a, b *discoveryv1.Run) int { return a.GetStartedAt().AsTime().Compare(b.GetStartedAt().AsTime()) })
		return out
	}
	servicetest.Eventually(t, 20*time.Second, "three notification-triggered scans ended", func() bool {
		rs := notifiedRuns()
		return len(rs) >= 3 && discovery.Terminal(rs[2])
	})
	runs := notifiedRuns()
	var notified, suppressed, delayed int
	for i, r := range runs {
		notified++
		if i > 0 {
			// The i-th follows i fruitless ones: at least 1 s doubled i times.
			gap := r.GetStartedAt().AsTime().Sub(runs[i-1].GetStartedAt().AsTime())
			if least := time.Second << i; gap < least-50*time.Millisecond {
				t.Fatalf("notification-triggered scan %d started %v after the previous one, want at least %v", i+1, gap, least)
			}
		}
		if r.GetStartedAt().AsTime().Before(began.Add(-time.Second)) {
			t.Fatalf("a notification-triggered run before the first commit: %v", r)
		}
		if discovery.Terminal(r) && r.GetReason() != discoveryv1.RunReason_RUN_REASON_UNCHANGED {
			t.Fatalf("a rescan of the unchanged catalog ended %v %v (%s)", r.GetState(), r.GetReason(), r.GetDetail())
		}
		suppressed += int(r.GetSuppressedNotifications())
		if r.GetNotificationDelayMs() > 0 {
			delayed++
		}
	}
	t.Logf("%d notification-triggered runs in %v, %d notifications held back, %d delayed; server listed %d times",
		notified, time.Since(began).Round(time.Millisecond), suppressed, delayed, srv.Calls())
	if suppressed == 0 {
		t.Fatal("no notification-triggered run records notifications held back")
	}
	if delayed == 0 {
		t.Fatal("no notification-triggered run records a rate-limit delay")
	}
	held := metric(t, reg, "toolcrib_discovery_suppressed_notifications_total", nil)
	if held < 1 {
		t.Fatalf("suppressed notifications metric %v, want at least 1", held)
	}
	if limited := metric(t, reg, "toolcrib_discovery_suppressed_notifications_total", map[string]string{"reason": scan.SuppressedRateLimited}); limited < 1 {
		t.Fatalf("no notification counted as rate_limited (total %v)", held)
	}
	if n := metric(t, reg, "toolcrib_discovery_listeners", nil); n != 1 {
		t.Fatalf("listeners gauge %v, want 1", n)
	}
}

// TestChangeHeardLongAfterACommitActivatesWithinTwoSeconds: after a scan
// commits, discovery keeps a listening connection to a server that declared
// tools.listChanged (the standalone SSE stream under 2025-11-25,
// subscriptions/listen under 2026-07-28), so a change made 30 s later —
// long after the 500 ms linger of this harness — activates a new
// generation within 2 s, over streamable HTTP and stdio, for both
// protocol versions. The four cases run in parallel.
func TestChangeHeardLongAfterACommitActivatesWithinTwoSeconds(t *testing.T) {
	t.Parallel()
	// The promise is 2 s (measured 0.05-0.2 s on a quiet machine; each
	// case logs its figure). The assertion allows 5 s because under -race
	// with the whole suite running on 2 cores one stdio case took 2.2 s;
	// without a listener the change would wait for the 15-minute refresh,
	// so 5 s still fails when nothing listens.
	const after, within = 30 * time.Second, 5 * time.Second
	type change func()
	cases := []struct {
		name, version string
		setup         func(t *testing.T, e *env) change
	}{
		{"http 2025-11-25", "2025-11-25", func(t *testing.T, e *env) change {
			cat := discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("x", 3)...)
			srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
			e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
			return func() { cat.SetTools("r-2", discoverytest.Tools("x", 4)...); srv.Notify() }
		}},
		{"http 2026-07-28", "2026-07-28", func(t *testing.T, e *env) change {
			cat := discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("x", 3)...)
			srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{Stateless: true}, false)
			e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
			return func() { cat.SetTools("r-2", discoverytest.Tools("x", 4)...); srv.Notify() }
		}},
		{"stdio 2025-11-25", "2025-11-25", func(t *testing.T, e *env) change { return stdioChange(t, e, []string{"2025-11-25"}) }},
		{"stdio 2026-07-28", "2026-07-28", func(t *testing.T, e *env) change { return stdioChange(t, e, nil) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			e := start(t, func(c *discovery.Config) { c.Metrics = reg })
			changeIt := tc.setup(t, e)
			first := e.scanAndWait("inventory", class)
			want(t, first, eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
			if first.GetProtocolVersion() != tc.version {
				t.Fatalf("negotiated %s, want %s", first.GetProtocolVersion(), tc.version)
			}
			time.Sleep(after)
			if n := metric(t, reg, "toolcrib_discovery_listeners", nil); n != 1 {
				t.Fatalf("listeners gauge %v after %s, want 1", n, after)
			}
			if runs := e.runsOf("inventory", class); len(runs) != 1 {
				t.Fatalf("%d runs before the change, want only the first (a listener must not rescan by itself)", len(runs))
			}
			changed := time.Now()
			changeIt()
			for {
				if p := e.active("inventory", class).GetPointer(); p.GetGeneration() == 2 {
					took := time.Since(changed)
					t.Logf("generation 2 active %s after the change", took.Round(time.Millisecond))
					if took > within {
						t.Fatalf("generation 2 took %s after the change, want at most %s", took, within)
					}
					break
				}
				if time.Since(changed) > within+5*time.Second {
					t.Fatalf("no new generation %s after the change", time.Since(changed))
				}
				time.Sleep(20 * time.Millisecond)
			}
			r := e.runsOf("inventory", class)[0]
			if r.GetTrigger() != discoveryv1.ScanTrigger_SCAN_TRIGGER_LIST_CHANGED || r.GetGeneration() != 2 || r.GetSourceRevision() != "r-2" {
				t.Fatalf("the run that activated generation 2: %v", r)
			}
		})
	}
}

// stdioChange registers an mcpstdio server (restricted to versions) whose
// catalog changes when the returned function is called.
func stdioChange(t *testing.T, e *env, versions []string) func() {
	file := filepath.Join(t.TempDir(), "change")
	cmd, args := discoverytest.StdioServer(t, discoverytest.StdioSpec{Tools: discoverytest.Tools("s", 3), PageSize: 2, Revision: "r-1",
		Versions: versions, ChangeFile: file, ChangedTools: discoverytest.Tools("s", 4), ChangedRevision: "r-2"})
	e.reg.AddTenant(tenant)
	e.reg.PutServer(&registryv1.Server{ServerId: "inventory", TrustLevel: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		Transport:      &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: cmd, Args: args}}})
	e.bind(class, "inventory", "env:"+envRef)
	return func() {
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeepMessageIsQuarantinedNotRetried: a tool whose input schema nests
// 2,000 levels (beyond the 1,000 the go-sdk decodes) ends QUARANTINED
// MESSAGE_TOO_DEEP, with the limit in the detail, after one run: not
// INCOMPLETE TRANSPORT_ERROR retried with backoff; nothing is activated.
func TestDeepMessageIsQuarantinedNotRetried(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	cat := discoverytest.NewCatalog("r-1", 2, append(discoverytest.Tools("x", 3), discoverytest.DeepTool("deep", 2000))...)
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e.register("deep", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	tk := e.scan("deep", class)
	r := e.wait(tk.GetScanId(), nil)
	want(t, r, quarantined, discoveryv1.RunReason_RUN_REASON_MESSAGE_TOO_DEEP)
	if wantDetail := fmt.Sprintf("deeper than %d levels", crawl.MaxMessageDepth); !strings.Contains(r.GetDetail(), wantDetail) {
		t.Fatalf("detail %q does not name the limit (%q)", r.GetDetail(), wantDetail)
	}
	time.Sleep(1500 * time.Millisecond) // several retry delays of this harness (100 ms doubling)
	if runs := e.runsOf("deep", class); len(runs) != 1 {
		t.Fatalf("%d runs, want 1: a quarantined scan is not retried", len(runs))
	}
	if _, err := e.admin.GetActiveSnapshot(ctxT(t), &discoveryv1.GetActiveSnapshotRequest{ServerId: "deep", AudienceClass: class}); status.Code(err) != codes.NotFound {
		t.Fatalf("active snapshot of a quarantined catalog: %v, want NotFound", err)
	}
}

// TestListenersSpreadOverProcessesAndMoveWhenOneStops: two discovery
// processes on one database share the listening connections of four
// servers through advisory locks: every pair is listened to by exactly
// one of them (the gauges add up to 4), each takes its share (2), and
// when one process stops the other takes its pairs over and queues a
// LISTEN_RESUMED scan for each (a change may have gone unheard meanwhile),
// after which a change is heard again.
func TestListenersSpreadOverProcessesAndMoveWhenOneStops(t *testing.T) {
	t.Parallel()
	fast := func(reg *prometheus.Registry) func(*discovery.Config) {
		return func(c *discovery.Config) { c.Metrics, c.ListenSweep = reg, 200*time.Millisecond }
	}
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a := start(t, fast(regA))
	servers := map[string]*discoverytest.HTTPServer{}
	cats := map[string]*discoverytest.Catalog{}
	for i := range 4 {
		id := fmt.Sprintf("srv-%d", i)
		cats[id] = discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...)
		servers[id] = discoverytest.NewHTTP(t, cats[id], discoverytest.ServerOptions{}, false)
		a.register(id, servers[id].URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	}
	listening := func(reg *prometheus.Registry) int { return int(metric(t, reg, "toolcrib_discovery_listeners", nil)) }
	t.Run("two processes", func(t *testing.T) {
		b := startOn(t, a.auth, a.url, a.reg, fast(regB))
		for id := range servers {
			want(t, b.scanAndWait(id, class), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
		}
		servicetest.Eventually(t, 20*time.Second, "the listeners to spread", func() bool { return listening(regA) == 2 && listening(regB) == 2 })
		// Stable: a few sweeps later nothing moved and nothing was rescanned.
		time.Sleep(time.Second)
		if na, nb := listening(regA), listening(regB); na+nb != 4 || na != 2 {
			t.Fatalf("listeners %d + %d, want 2 + 2", na, nb)
		}
	})
	// The second process has stopped: its pairs move to the first.
	servicetest.Eventually(t, 20*time.Second, "the first process to take every listener", func() bool { return listening(regA) == 4 })
	servicetest.Eventually(t, 20*time.Second, "a LISTEN_RESUMED scan of each pair taken over", func() bool {
		resumed := 0
		for id := range servers {
			for _, r := range a.runsOf(id, class) {
				if r.GetTrigger() == discoveryv1.ScanTrigger_SCAN_TRIGGER_LISTEN_RESUMED && discovery.Terminal(r) {
					want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNCHANGED)
					resumed++
					break
				}
			}
		}
		return resumed >= 2
	})
	cats["srv-0"].SetTools("r-2", discoverytest.Tools("x", 3)...)
	// The taken-over listener may still be connecting (its gauge counts the
	// lock, not the stream): notify until the change is heard, as a server
	// does on each change. Only process a runs now, so it heard it.
	polls := 0
	servicetest.Eventually(t, 20*time.Second, "the change to be heard by the process that took over", func() bool {
		if polls%20 == 0 { // once a second
			servers["srv-0"].Notify()
		}
		polls++
		return a.active("srv-0", class).GetPointer().GetGeneration() == 2
	})
}

// TestListenerShareCountsOnlyThisDatabase: presence locks of discovery
// processes on another database of the same cluster (another deployment,
// or another test) do not count as processes sharing this database's
// pairs: a lone process keeps listening to every pair through its sweeps
// (above its fair share it would hand pairs back). CI saw a lone process
// left with half of the pairs while parallel tests' processes ran on other
// databases.
func TestListenerShareCountsOnlyThisDatabase(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	a := start(t, func(c *discovery.Config) { c.Metrics, c.ListenSweep = reg, 100*time.Millisecond })
	for i := range 4 {
		id := fmt.Sprintf("srv-%d", i)
		srv := discoverytest.NewHTTP(t, discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...), discoverytest.ServerOptions{}, false)
		a.register(id, srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
		want(t, a.scanAndWait(id, class), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	}
	listening := func() float64 { return metric(t, reg, "toolcrib_discovery_listeners", nil) }
	servicetest.Eventually(t, 20*time.Second, "the lone process to listen to every pair", func() bool { return listening() == 4 })

	other, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	for i := range 3 {
		if _, err := other.Exec(ctx, `SELECT pg_advisory_lock($1::int, $2::int)`, scan.PresenceLockSpace, 1000+i); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 { // ten sweeps
		time.Sleep(100 * time.Millisecond)
		if n := listening(); n != 4 {
			t.Fatalf("%v listeners after three processes started on another database, want 4", n)
		}
	}
}
