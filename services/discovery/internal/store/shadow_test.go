package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolcrib/toolcrib/services/discovery/internal/comparison"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

func (f *fixture) comparisons(t *testing.T) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM run_comparisons`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The comparison is part of the commit: a commit that fails after it (the
// queue job's step in the same transaction) or loses the CAS leaves no
// comparison; a commit that succeeds always has one once the pair has a
// static list or a previous generation.
func TestTheComparisonCommitsWithTheGeneration(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// The pair's first generation without a static list: nothing to compare.
	if _, err := f.commit(t, "inv", "tenant-a.readers", "r1", store.Expected{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := f.comparisons(t); n != 0 {
		t.Fatalf("%d comparisons of a first generation with no static list", n)
	}
	if _, err := f.st.SetStaticList(ctx, store.StaticList{ServerID: "inv", AudienceClass: "tenant-a.readers", TenantID: "tenant-a",
		Entries: []comparison.Entry{{Name: "t0"}, {Name: "gone"}}, SetBy: "test"}, 0); err != nil {
		t.Fatal(err)
	}
	// A lost CAS and a failing transaction store no comparison.
	if _, err := f.commit(t, "inv", "tenant-a.readers", "r2", store.Expected{Generation: 1, Revision: 99}, time.Hour); !errors.Is(err, store.ErrCASConflict) {
		t.Fatalf("stale expectation: %v", err)
	}
	boom := errors.New("the queue job could not be completed")
	run := f.run(t, "inv", "tenant-a.readers")
	_, err := f.st.Commit(ctx, store.Commit{RunID: run, Expected: f.view(t, "inv", "tenant-a.readers"), Snapshot: snapshot("inv", "tenant-a.readers", "r2", 3, time.Hour),
		State: eligible, Run: store.RunEnd{SourceRevision: "r2", ToolCount: 3}, InTx: func(context.Context, pgx.Tx) error { return boom }})
	if !errors.Is(err, boom) {
		t.Fatalf("failing commit: %v", err)
	}
	if n := f.comparisons(t); n != 0 {
		t.Fatalf("%d comparisons after a lost CAS and a failed commit", n)
	}
	c, err := f.commit(t, "inv", "tenant-a.readers", "r2", f.view(t, "inv", "tenant-a.readers"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.st.RunComparison(ctx, c.Receipt.RunId)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetGeneration() != 2 || got.GetPreviousGeneration() != 1 || got.GetStaticListVersion() != 1 ||
		len(got.GetAgainstStatic().GetMissing()) != 1 || got.GetAgainstStatic().GetMissing()[0] != "gone" ||
		got.GetAgainstStatic().GetExtraCount() != 2 || got.GetAgainstPrevious().GetSameCount() != 3 {
		t.Fatalf("comparison: %v", got)
	}
	if n := f.comparisons(t); n != 1 {
		t.Fatalf("%d comparisons, want 1", n)
	}
}
