package faults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery"
)

// Named faults of pagination and notification (seed 000, "attacking
// integrity with drift and reordering"), each against the real discovery
// workers, real Postgres and fixture servers over streamable HTTP, at the
// stateless 2026-07-28 protocol and the stateful 2025-11-25 one.

// tools returns n well-formed tools named <prefix>_<i>.
func tools(prefix string, n int) []fixture.Tool {
	out := make([]fixture.Tool, n)
	for i := range out {
		out[i] = fixture.NewTool(fmt.Sprintf("%s_%d", prefix, i), fmt.Sprintf("Does %s number %d.", prefix, i))
	}
	return out
}

// startFixture starts a fixture server, closed when the test ends.
func startFixture(t *testing.T, script fixture.Script) *fixture.Server {
	t.Helper()
	s, err := fixture.New(script, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// serveHTTP serves a fixture over streamable HTTP on loopback.
func serveHTTP(t *testing.T, s *fixture.Server, o fixture.HTTPOptions) *fixture.Endpoint {
	t.Helper()
	ep, err := s.StartHTTP(o)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// protocols are the HTTP flavours every pagination fault is tried over.
var protocols = []struct {
	name    string
	version string
}{
	{"2026-07-28 stateless", fixture.Version20260728},
	{"2025-11-25 stateful", fixture.Version20251125},
}

// TestListChangedAfterPage2AbortsTheScan: a `list_changed` sent after page
// 2 (on page 3's stream, before its answer) ends the run INCOMPLETE
// LIST_CHANGED with the two pages it read recorded; nothing is activated;
// the scan is retried and the retry proves the whole catalog.
func TestListChangedAfterPage2AbortsTheScan(t *testing.T) {
	t.Parallel()
	e := startDiscovery(t, envOptions{})
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			server := "inventory-" + p.version
			s := startFixture(t, fixture.Script{ProtocolVersion: p.version, Versioned: true, PageSize: 2, ListChanged: true,
				Tools: tools("inv", 6), Steps: []fixture.Step{{Request: 3, Notify: true}}})
			e.register(server, overHTTP(serveHTTP(t, s, fixture.HTTPOptions{}).URL), serverProvided, "")

			first, _ := e.failsOnceThenProves(t, e.scan(server, class), server, s, discoveryv1.RunReason_RUN_REASON_LIST_CHANGED)
			if pages := e.run(first.GetRunId()).GetPages(); len(pages) != 2 {
				t.Fatalf("the aborted run recorded %d pages, want the 2 read before the notification", len(pages))
			}
		})
	}
}

// TestABACatalogChangeBetweenScansIsANewGeneration: between two scans the
// catalog goes A → B → A. Both scans list the same tools, so the page root
// is the same, but the source revision moved (r-1 → r-3): the second scan
// commits a new generation, not UNCHANGED. DESIGN §6: a rescan makes no
// new generation only with the same revision and page root; an A-B-A
// change is caught by the revision, never by comparing two scans (a plan,
// an approval or a cache keyed by generation 1 must see that the catalog
// was something else in between). A third scan with nothing changed is
// UNCHANGED. An unversioned source cannot see A-B-A at all; it is
// UNCHANGED there, which is why it never backs an autonomous call (I3).
func TestABACatalogChangeBetweenScansIsANewGeneration(t *testing.T) {
	t.Parallel()
	e := startDiscovery(t, envOptions{})
	a, b := tools("inv", 3), tools("other", 2)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			server := "inventory-" + p.version
			s := startFixture(t, fixture.Script{ProtocolVersion: p.version, Versioned: true, PageSize: 2, Tools: a})
			e.register(server, overHTTP(serveHTTP(t, s, fixture.HTTPOptions{}).URL), serverProvided, "")
			first := e.wait(e.scan(server, class), nil)
			want(t, first, eligible, noReason)
			g1 := e.checkWhole(t, server, class, s.Log().Events())

			for _, m := range []fixture.Mutation{fixture.Replace(b...), fixture.Replace(a...)} {
				if _, err := s.Apply(m); err != nil {
					t.Fatal(err)
				}
			}
			second := e.wait(e.scan(server, class), nil)
			want(t, second, eligible, noReason)
			g2 := e.checkWhole(t, server, class, s.Log().Events())
			if second.GetGeneration() != 2 || g1.GetSourceRevision() != "r-1" || g2.GetSourceRevision() != "r-3" ||
				g1.GetPageRoot() != g2.GetPageRoot() || names(g1.GetTools()) != names(g2.GetTools()) {
				t.Fatalf("A-B-A: generation 1 %s root %s [%s], generation %d %s root %s [%s]: want generation 2 at r-3 with the same tools and page root",
					g1.GetSourceRevision(), g1.GetPageRoot(), names(g1.GetTools()), second.GetGeneration(), g2.GetSourceRevision(), g2.GetPageRoot(), names(g2.GetTools()))
			}
			old, err := e.admin.GetSnapshot(ctxT(t), &discoveryv1.GetSnapshotRequest{ServerId: server, AudienceClass: class, Generation: 1})
			if err != nil || old.GetSnapshot().GetState() != retired {
				t.Fatalf("generation 1 after A-B-A: %v %v, want RETIRED", old.GetSnapshot().GetState(), err)
			}

			third := e.wait(e.scan(server, class), nil)
			want(t, third, proven, discoveryv1.RunReason_RUN_REASON_UNCHANGED)
			if third.GetGeneration() != 0 || third.GetConfirmedGeneration() != 2 || len(e.generations(server, class)) != 2 {
				t.Fatalf("unchanged rescan: generation %d, confirmed %d, %d generations", third.GetGeneration(), third.GetConfirmedGeneration(), len(e.generations(server, class)))
			}
		})
	}
	t.Run("unversioned source", func(t *testing.T) {
		server := "plain"
		s := startFixture(t, fixture.Script{Versioned: false, PageSize: 2, Tools: a})
		e.register(server, overHTTP(serveHTTP(t, s, fixture.HTTPOptions{}).URL), noRevision, "")
		want(t, e.wait(e.scan(server, class), nil), unversioned, noReason)
		for _, m := range []fixture.Mutation{fixture.Replace(b...), fixture.Replace(a...)} {
			if _, err := s.Apply(m); err != nil {
				t.Fatal(err)
			}
		}
		second := e.wait(e.scan(server, class), nil)
		want(t, second, unversioned, discoveryv1.RunReason_RUN_REASON_UNCHANGED)
		observationOnly(t, e, server, 1, a)
	})
}

// TestLateListChangedSchedulesARescan: a `list_changed` that arrives after
// the scan committed (the session stays open for --linger) does not touch
// the committed generation; it queues a rescan (trigger LIST_CHANGED) that
// proves the new catalog as the next generation. The first scan's
// outcome is unaffected: the oracle ignores a notification after the
// closing re-check.
func TestLateListChangedSchedulesARescan(t *testing.T) {
	t.Parallel()
	e := startDiscovery(t, envOptions{configure: func(c *discovery.Config) { c.Linger = 30 * time.Second }})
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			server := "inventory-" + p.version
			s := startFixture(t, fixture.Script{ProtocolVersion: p.version, Versioned: true, PageSize: 2, ListChanged: true, Tools: tools("inv", 3)})
			e.register(server, overHTTP(serveHTTP(t, s, fixture.HTTPOptions{}).URL), serverProvided, "")
			first := e.wait(e.scan(server, class), nil)
			want(t, first, eligible, noReason)
			e.checkWhole(t, server, class, s.Log().Events())

			if _, err := s.Apply(fixture.Upsert(fixture.NewTool("inv_1", "Does inv number 1, and now repairs it too."))); err != nil {
				t.Fatal(err)
			}
			var rescan *discoveryv1.Run
			deadline := time.Now().Add(20 * time.Second)
			for rescan == nil {
				// Again and again: a 2026-07-28 session hears it only once its
				// subscriptions/listen stream is open.
				s.NotifyListChanged()
				runs, err := e.admin.ListRuns(ctxT(t), &discoveryv1.ListRunsRequest{ServerId: server})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range runs.GetRuns() {
					if r.GetTrigger() == discoveryv1.ScanTrigger_SCAN_TRIGGER_LIST_CHANGED {
						rescan = r
					}
				}
				if time.Now().After(deadline) {
					t.Fatal("no rescan was queued by a list_changed that arrived after the commit")
				}
				time.Sleep(100 * time.Millisecond)
			}
			rescan = e.wait(rescan.GetScanId(), nil)
			want(t, rescan, eligible, noReason)
			snap := e.checkWhole(t, server, class, s.Log().Events())
			if rescan.GetGeneration() != 2 || snap.GetSourceRevision() != "r-2" {
				t.Fatalf("rescan committed generation %d at %s, want 2 at r-2", rescan.GetGeneration(), snap.GetSourceRevision())
			}
			agrees(t, first, judge(t, scanLogs(s.Log().Events())[0], serverProvided))
		})
	}
}

// TestSourceRevisionChangingBetweenPages: the catalog changes while it is
// being paged. A lenient server serves page 2 from the new catalog under
// its new revision; a revision-bound one (the revision package's way)
// refuses page 2's cursor with -32602. Either way the run is INCOMPLETE
// REVISION_MISMATCH, nothing of r-1 or r-2 is activated by it, and the
// retry proves r-2 whole.
func TestSourceRevisionChangingBetweenPages(t *testing.T) {
	t.Parallel()
	e := startDiscovery(t, envOptions{})
	for _, policy := range []fixture.StaleCursorPolicy{fixture.StaleCursorServe, fixture.StaleCursorReject} {
		for _, p := range protocols {
			t.Run(string(policy)+" "+p.name, func(t *testing.T) {
				server := fmt.Sprintf("inventory-%s-%s", policy, p.version)
				s := startFixture(t, fixture.Script{ProtocolVersion: p.version, Versioned: true, PageSize: 2, StaleCursor: policy,
					Tools: tools("inv", 5), Steps: []fixture.Step{{Request: 2, Mutate: []fixture.Mutation{fixture.Insert(0, fixture.NewTool("new", "A new tool."))}}}})
				e.register(server, overHTTP(serveHTTP(t, s, fixture.HTTPOptions{}).URL), serverProvided, "")
				e.failsOnceThenProves(t, e.scan(server, class), server, s, discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH)
				if snap := e.active(server, class).GetSnapshot(); snap.GetSourceRevision() != "r-2" || len(snap.GetTools()) != 6 {
					t.Fatalf("retry proved %s with %d tools, want r-2 with 6", snap.GetSourceRevision(), len(snap.GetTools()))
				}
			})
		}
	}
}

// TestCursorFaultsAreIncomplete: a server that returns the cursor it was
// just given, or one it gave earlier (a cycle), or (2026-07-28) an empty
// nextCursor on page 1 (which points back at page 1) never gets the pages
// it served activated; the scan is INCOMPLETE with that reason and is
// retried (the fault was one-off, so the retry proves the catalog).
func TestCursorFaultsAreIncomplete(t *testing.T) {
	t.Parallel()
	e := startDiscovery(t, envOptions{})
	for i, tc := range []struct {
		name    string
		version string
		step    fixture.Step
		reason  discoveryv1.RunReason
	}{
		{"repeated cursor", fixture.Version20251125, fixture.Step{Request: 2, Cursor: fixture.CursorRepeat}, discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR},
		{"repeated cursor 2026-07-28", fixture.Version20260728, fixture.Step{Request: 2, Cursor: fixture.CursorRepeat}, discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR},
		{"cursor cycle", fixture.Version20251125, fixture.Step{Request: 3, Cursor: fixture.CursorCycle, CycleTo: 2}, discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE},
		{"cursor cycle 2026-07-28", fixture.Version20260728, fixture.Step{Request: 3, Cursor: fixture.CursorCycle, CycleTo: 2}, discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE},
		{"empty cursor on page 1, 2026-07-28", fixture.Version20260728, fixture.Step{Request: 1, Cursor: fixture.CursorEmpty}, discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR},
		{"empty cursor on page 2, 2026-07-28", fixture.Version20260728, fixture.Step{Request: 2, Cursor: fixture.CursorEmpty}, discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := fmt.Sprintf("cursor-%d", i)
			s := startFixture(t, fixture.Script{ProtocolVersion: tc.version, Versioned: true, PageSize: 2, Tools: tools("inv", 7), Steps: []fixture.Step{tc.step}})
			e.register(server, overHTTP(serveHTTP(t, s, fixture.HTTPOptions{}).URL), serverProvided, "")
			e.failsOnceThenProves(t, e.scan(server, class), server, s, tc.reason)
		})
	}
}
