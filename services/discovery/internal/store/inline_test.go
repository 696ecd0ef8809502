package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/services/discovery/candidate"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// hostileFlags are flags no array literal or JSON encoding may bend:
// separators, quotes, braces, backslashes, NUL-free control text and
// non-ASCII.
var hostileFlags = [][]string{
	nil,
	{"DESCRIPTION_TRUNCATED"},
	{`a,"b"}`, `{c}`, `back\slash`, "tab\there", "ünïcode ✓", "NULL", ""},
}

// pagesOf is n pages of a crawl, each with cursors and a revision.
func pagesOf(n int) []crawl.Page {
	at := time.Now().Truncate(time.Microsecond).UTC()
	pages := make([]crawl.Page, n)
	for i := range pages {
		pages[i] = crawl.Page{Index: i, CursorIn: fmt.Sprintf("c%d", i), CursorOut: fmt.Sprintf(`c"%d,}`, i+1), HasNext: i < n-1,
			Revision: "r1", HasRevision: true, ToolCount: i % 7, Digest: canonical.DigestBytes([]byte{byte(i)}), Bytes: int64(1000 + i),
			ReceivedAt: at.Add(time.Duration(i) * time.Millisecond)}
	}
	return pages
}

// A commit writes a small snapshot's tools and a short run's pages in the
// round trips it makes anyway and larger ones by COPY: both must store
// every field exactly, flags in order, raw bytes unchanged.
func TestCommitStoresToolsAndPagesExactlyAtAnySize(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, size := range []struct{ tools, pages int }{{1, 1}, {6, 2}, {256, 256}, {257, 257}, {1200, 300}} {
		server := fmt.Sprintf("size-%d", size.tools)
		snap := snapshot(server, "a.readers", "r1", size.tools, time.Hour)
		for i, tl := range snap.Tools {
			tl.Flags = hostileFlags[i%len(hostileFlags)]
			if i%2 == 1 {
				tl.OutputSchemaDigest = canonical.DigestBytes([]byte(tl.Name))
			}
			tl.Title, tl.Description = "", "" // not stored per tool: the raw JSON carries them
		}
		snap.Tools[0].Raw = []byte(`{"name":"t0","description":"\u0000 and \\ and \"","inputSchema":{"type":"object"}}`)
		pages := pagesOf(size.pages)
		run := f.run(t, server, "a.readers")
		c, err := f.st.Commit(ctx, store.Commit{RunID: run, Snapshot: snap, State: eligible,
			Run: store.RunEnd{SourceRevision: "r1", ToolCount: size.tools, Pages: pages}})
		if err != nil {
			t.Fatalf("%d tools: %v", size.tools, err)
		}
		got, total, err := f.st.Snapshot(ctx, server, "a.readers", c.Pointer.Generation, 0, 0)
		if err != nil || total != size.tools || len(got.Tools) != size.tools {
			t.Fatalf("%d tools: read back %d (total %d): %v", size.tools, len(got.GetTools()), total, err)
		}
		for i, want := range snap.Tools {
			g := got.Tools[i]
			if g.ToolId != want.ToolId || g.Name != want.Name || g.DescriptorDigest != want.DescriptorDigest ||
				g.InputSchemaDigest != want.InputSchemaDigest || g.OutputSchemaDigest != want.OutputSchemaDigest ||
				g.SchemaDialect != want.SchemaDialect || string(g.Raw) != string(want.Raw) ||
				!slices.Equal(g.Flags, want.Flags) {
				t.Fatalf("%d tools: tool %d stored as %v, want %v (flags %q)", size.tools, i, g, want, want.Flags)
			}
		}
		if d, err := candidate.SnapshotDigest(got, eligible); err != nil || d != got.SnapshotDigest {
			t.Fatalf("%d tools: digest %s, recomputed %s (%v)", size.tools, got.SnapshotDigest, d, err)
		}
		r, err := f.st.GetRun(ctx, run, true)
		if err != nil || len(r.Pages) != size.pages {
			t.Fatalf("%d pages: read back %v (%v)", size.pages, r.GetPages(), err)
		}
		for i, want := range pages {
			g := r.Pages[i]
			if int(g.Index) != want.Index || g.CursorIn != want.CursorIn || g.CursorOut != want.CursorOut || g.HasNext != want.HasNext ||
				g.Revision != want.Revision || int(g.ToolCount) != want.ToolCount || g.PageDigest != want.Digest || g.Bytes != want.Bytes ||
				!g.ReceivedAt.AsTime().Equal(want.ReceivedAt) {
				t.Fatalf("%d pages: page %d stored as %v, want %+v", size.pages, i, g, want)
			}
		}
	}
}

// A run that another worker already ended (marked lost) keeps its record:
// the commit of its candidate writes none of its pages.
func TestCommitOfAnEndedRunWritesNoPages(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, pages := range []int{2, 300} {
		server := fmt.Sprintf("ended-%d", pages)
		run := f.run(t, server, "a.readers")
		if err := f.st.FinishRun(ctx, run, store.RunEnd{State: catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.Commit(ctx, store.Commit{RunID: run, Snapshot: snapshot(server, "a.readers", "r1", 3, time.Hour), State: eligible,
			Run: store.RunEnd{SourceRevision: "r1", ToolCount: 3, Pages: pagesOf(pages)}}); err != nil {
			t.Fatal(err)
		}
		r, err := f.st.GetRun(ctx, run, true)
		if err != nil || len(r.Pages) != 0 || r.State != catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE {
			t.Fatalf("%d pages: the ended run became %v with %d pages (%v)", pages, r.GetState(), len(r.GetPages()), err)
		}
	}
}

// StartScan starts the run and reads the pair's pointer view in one round
// trip: the same view View reads, the listening flag included, whether
// the pointer exists or not; a run it finds unfinished is lost.
func TestStartScanReadsThePointerWithTheRun(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	nr := store.NewRun{ScanID: "1", Attempt: 1, ServerID: "srv", AudienceClass: "a.readers", Worker: "test:1", MarkLost: true}
	conn, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// One session: its lock is re-entrant.
	first, v, _, err := f.st.StartScan(ctx, conn, 7, nr)
	if err != nil || v != (store.ScanView{}) {
		t.Fatalf("no pointer yet: view %+v (%v)", v, err)
	}
	if err := f.st.SetListening(ctx, "srv", "a.readers", true); err != nil {
		t.Fatal(err)
	}
	if _, v, _, err := f.st.StartScan(ctx, conn, 7, nr); err != nil || !v.Listening || v.Expected != (store.Expected{}) {
		t.Fatalf("listed pair without a pointer: view %+v (%v)", v, err)
	}
	if r, err := f.st.GetRun(ctx, first, false); err != nil || r.State != catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE {
		t.Fatalf("the unfinished first run was not marked lost: %v (%v)", r.GetState(), err)
	}
	if _, err := f.commit(t, "srv", "a.readers", "r1", store.Expected{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetListening(ctx, "srv", "a.readers", false); err != nil {
		t.Fatal(err)
	}
	_, v, _, err = f.st.StartScan(ctx, conn, 7, nr)
	want, werr := f.st.View(ctx, "srv", "a.readers")
	if err != nil || werr != nil || v != want || !v.Active || v.Expected.Generation != 1 || v.SourceRevision != "r1" || v.Listening ||
		v.SnapshotState != eligible {
		t.Fatalf("after a commit: StartScan read %+v, View %+v (%v, %v)", v, want, err, werr)
	}
}

// StartScan starts a run only holding the pair's lock, taken in the same
// round trip: while another session holds it, StartScan writes nothing (no
// run, and the holder's unfinished run is not marked lost); once that
// session released it, StartScan takes it, starts its run and marks the
// holder's unfinished run lost.
func TestStartScanStartsOnlyHoldingTheLock(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const key = 42
	nr := store.NewRun{ScanID: "1", Attempt: 1, ServerID: "srv", AudienceClass: "a.readers", Worker: "test:1", MarkLost: true,
		TenantID: "tenant-a"}
	holder, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	other, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	held, _, locked, err := f.st.StartScan(ctx, holder, key, nr)
	if err != nil || !locked || held == "" {
		t.Fatalf("the first session: run %q locked %v (%v)", held, locked, err)
	}
	id, _, locked, err := f.st.StartScan(ctx, other, key, nr)
	if err != nil || locked || id != "" {
		t.Fatalf("while the lock is held: run %q locked %v (%v)", id, locked, err)
	}
	runs, _, err := f.st.ListRuns(ctx, store.RunFilter{ServerID: "srv"}, nil, 10)
	if err != nil || len(runs) != 1 || runs[0].GetRunId() != held || runs[0].GetState() != catalogv1.DiscoveryState_DISCOVERY_STATE_DISCOVERING {
		t.Fatalf("while the lock is held, the runs are %v (%v)", runs, err)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
		t.Fatal(err)
	}
	id, _, locked, err = f.st.StartScan(ctx, other, key, nr)
	if err != nil || !locked || id == "" {
		t.Fatalf("after the release: run %q locked %v (%v)", id, locked, err)
	}
	if r, err := f.st.GetRun(ctx, held, false); err != nil || r.GetState() != catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE ||
		r.GetReason() != discoveryv1.RunReason_RUN_REASON_WORKER_LOST {
		t.Fatalf("the first session's run: %v (%v)", r, err)
	}
	if r, err := f.st.GetRun(ctx, id, false); err != nil || r.GetState() != catalogv1.DiscoveryState_DISCOVERY_STATE_DISCOVERING ||
		r.GetTenantId() != "tenant-a" {
		t.Fatalf("the second session's run: %v (%v)", r, err)
	}
}
