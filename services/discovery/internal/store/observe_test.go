package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// recorder is an Observer that keeps what it heard.
type recorder struct {
	mu    sync.Mutex
	runs  []store.EndedRun
	moves []*store.Committed
}

func (r *recorder) RunEnded(e store.EndedRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, e)
}

func (r *recorder) PointerMoved(c *store.Committed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.moves = append(r.moves, c)
}

func (r *recorder) take() ([]store.EndedRun, []*store.Committed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	runs, moves := r.runs, r.moves
	r.runs, r.moves = nil, nil
	return runs, moves
}

// The observer hears every run end and pointer move once, after the commit,
// with the run's server, class, counts and duration; never a rolled-back
// commit, nor a second end of a run that had already ended.
func TestObserverHearsCommittedRunEndsAndMoves(t *testing.T) {
	f := newFixture(t)
	rec := &recorder{}
	f.st.WithObserver(rec)
	ctx := context.Background()
	const srv, aud = "inv", "tenant-a.readers"

	c1, err := f.commit(t, srv, aud, "r1", store.Expected{}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	runs, moves := rec.take()
	if len(runs) != 1 || len(moves) != 1 {
		t.Fatalf("after a commit: runs %v, moves %v", runs, moves)
	}
	r := runs[0]
	if r.RunID != c1.Receipt.RunId || r.ServerID != srv || r.AudienceClass != aud || r.State != eligible ||
		r.Reason != discoveryv1.RunReason_RUN_REASON_UNSPECIFIED || r.Pages != 1 || r.Tools != 3 || r.Generation != 1 || r.Took <= 0 {
		t.Fatalf("commit's run end: %+v", r)
	}
	if moves[0].Receipt.Move != catalogv1.PointerMove_POINTER_MOVE_ACTIVATE || moves[0].Pointer.Revision != 1 {
		t.Fatalf("commit's move: %v", moves[0])
	}

	// A lost CAS rolls back: nothing is heard.
	if _, err := f.commit(t, srv, aud, "r2", store.Expected{}, time.Hour); !errors.Is(err, store.ErrCASConflict) {
		t.Fatalf("stale commit: %v", err)
	}
	if runs, moves := rec.take(); len(runs) != 0 || len(moves) != 0 {
		t.Fatalf("after a lost CAS: runs %v, moves %v", runs, moves)
	}

	// A refresh confirms generation 1.
	exp := f.view(t, srv, aud)
	run := f.run(t, srv, aud)
	if _, err := f.st.Refresh(ctx, run, srv, aud, exp, time.Now().Add(2*time.Hour), 7,
		store.RunEnd{State: catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN, ToolCount: 3}, nil, 0, nil); err != nil {
		t.Fatal(err)
	}
	runs, moves = rec.take()
	if len(runs) != 1 || runs[0].RunID != run || runs[0].Reason != discoveryv1.RunReason_RUN_REASON_UNCHANGED || runs[0].Generation != 1 ||
		len(moves) != 1 || moves[0].Receipt.Move != catalogv1.PointerMove_POINTER_MOVE_REFRESH {
		t.Fatalf("after a refresh: runs %+v, moves %v", runs, moves)
	}

	// A failed run, and the same run finished again (ignored).
	run = f.run(t, srv, aud)
	end := store.RunEnd{State: catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE, Reason: discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR}
	for range 2 {
		if err := f.st.FinishRun(ctx, run, end); err != nil {
			t.Fatal(err)
		}
	}
	runs, _ = rec.take()
	if len(runs) != 1 || runs[0].RunID != run || runs[0].State != end.State || runs[0].Reason != end.Reason || runs[0].ServerID != srv {
		t.Fatalf("after a failed run finished twice: %+v", runs)
	}

	// A run left unfinished by a dead worker ends WORKER_LOST when the next
	// run of the pair starts, and by MarkLost.
	dead := f.run(t, srv, aud)
	next, err := f.st.StartRun(ctx, store.NewRun{ScanID: "2", Attempt: 1, ServerID: srv, AudienceClass: aud,
		Trigger: discoveryv1.ScanTrigger_SCAN_TRIGGER_MANUAL, Worker: "test:2", MarkLost: true})
	if err != nil {
		t.Fatal(err)
	}
	// The run of the lost CAS above was never finished either.
	runs, _ = rec.take()
	heard := map[string]bool{}
	for _, r := range runs {
		heard[r.RunID] = r.Reason == discoveryv1.RunReason_RUN_REASON_WORKER_LOST && r.AudienceClass == aud
	}
	if len(runs) != 2 || !heard[dead] {
		t.Fatalf("after StartRun marked runs lost: %+v", runs)
	}
	if n, err := f.st.MarkLost(ctx, srv, aud, ""); err != nil || n != 1 {
		t.Fatalf("MarkLost: %d %v", n, err)
	}
	runs, _ = rec.take()
	if len(runs) != 1 || runs[0].RunID != next || runs[0].Reason != discoveryv1.RunReason_RUN_REASON_WORKER_LOST {
		t.Fatalf("after MarkLost: %+v", runs)
	}

	// A rollback with nothing fresh to go back to closes the pointer.
	if _, err := f.st.Rollback(ctx, srv, aud, 1, 0, "test"); err != nil {
		t.Fatal(err)
	}
	if _, moves := rec.take(); len(moves) != 1 || moves[0].Receipt.Move != catalogv1.PointerMove_POINTER_MOVE_CLOSE {
		t.Fatalf("after a rollback: %v", moves)
	}
}
