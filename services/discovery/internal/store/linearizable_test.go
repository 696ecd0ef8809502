package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/faultreport"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// The pointer CAS as a sequential specification (DESIGN §3 I1, I10), for
// porcupine: every history of concurrent commits, rollbacks and reads of
// one pointer must be explainable by some order of these steps that
// respects real time.

// casState is the model of one pointer. It is a value; steps return a new
// one.
type casState struct {
	exists bool
	gen    int64 // the generation the pointer names
	rev    int64 // the change-log revision of its last move
	last   int64 // the highest generation ever committed
	closed bool
	// sources maps every committed generation to its source revision, as
	// "gen=rev;" pairs in generation order (a string keeps the state
	// comparable with ==).
	sources string
}

func (s casState) source(gen int64) (string, bool) {
	for _, kv := range strings.Split(s.sources, ";") {
		if g, rev, ok := strings.Cut(kv, "="); ok && g == strconv.FormatInt(gen, 10) {
			return rev, true
		}
	}
	return "", false
}

// newestBelow returns the newest committed generation older than gen (all
// are fresh in this test), 0 when none.
func (s casState) newestBelow(gen int64) int64 {
	var best int64
	for _, kv := range strings.Split(s.sources, ";") {
		g, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(g, 10, 64)
		if n < gen && n > best {
			best = n
		}
	}
	return best
}

type opKind int

const (
	opRead opKind = iota
	opCommit
	opRollback
)

// casInput is one operation as called.
type casInput struct {
	kind     opKind
	expected store.Expected // commit: generation and revision; rollback: generation
	source   string         // commit: the candidate's source revision
}

// casOutput is what the store answered.
type casOutput struct {
	err    string // "", "conflict", "closed", "not found", or another error
	gen    int64  // the pointer after the operation (read: as read)
	rev    int64
	closed bool
	source string // read: the source revision of the generation read
}

func errName(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, store.ErrCASConflict):
		return "conflict"
	case errors.Is(err, store.ErrClosed):
		return "closed"
	case errors.Is(err, store.ErrNotFound):
		return "not found"
	}
	return err.Error()
}

var pointerModel = porcupine.Model{
	Init: func() any { return casState{} },
	Step: func(st, in, out any) (bool, any) {
		s, i, o := st.(casState), in.(casInput), out.(casOutput)
		switch i.kind {
		case opRead:
			if !s.exists {
				return o.err == "not found", s
			}
			src, _ := s.source(s.gen)
			return o.err == "" && o.gen == s.gen && o.rev == s.rev && o.closed == s.closed && o.source == src, s
		case opCommit:
			var can bool
			if i.expected.Generation == 0 {
				can = !s.exists
			} else {
				can = s.exists && s.gen == i.expected.Generation && s.rev == i.expected.Revision
			}
			if !can {
				return o.err == "conflict", s
			}
			if o.err != "" || o.gen != s.last+1 || o.rev <= s.rev || o.closed {
				return false, s
			}
			s.exists, s.gen, s.last, s.rev, s.closed = true, o.gen, o.gen, o.rev, false
			s.sources += fmt.Sprintf("%d=%s;", o.gen, i.source)
			return true, s
		case opRollback:
			switch {
			case !s.exists:
				return o.err == "not found", s
			case s.gen != i.expected.Generation:
				return o.err == "conflict", s
			case s.closed:
				return o.err == "closed", s
			}
			if o.err != "" || o.rev <= s.rev {
				return false, s
			}
			if to := s.newestBelow(s.gen); to > 0 {
				if o.gen != to || o.closed {
					return false, s
				}
				s.gen = to
			} else {
				if o.gen != s.gen || !o.closed {
					return false, s
				}
				s.closed = true
			}
			s.rev = o.rev
			return true, s
		}
		return false, s
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(casInput), out.(casOutput)
		res := fmt.Sprintf("gen %d rev %d closed %v", o.gen, o.rev, o.closed)
		if o.err != "" {
			res = o.err
		}
		switch i.kind {
		case opCommit:
			return fmt.Sprintf("commit(%d@%d, %s) -> %s", i.expected.Generation, i.expected.Revision, i.source, res)
		case opRollback:
			return fmt.Sprintf("rollback(%d) -> %s", i.expected.Generation, res)
		}
		return fmt.Sprintf("read -> %s source %q", res, o.source)
	},
	DescribeState: func(st any) string {
		s := st.(casState)
		return fmt.Sprintf("exists=%v gen=%d rev=%d last=%d closed=%v", s.exists, s.gen, s.rev, s.last, s.closed)
	},
}

// history records operations with call and return times on one monotonic
// clock.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func (h *history) now() int64 { return time.Since(h.start).Nanoseconds() }

func (h *history) add(client int, in casInput, call int64, out casOutput) {
	ret := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// TestPointerCASIsLinearizable races N clients on one pointer through the
// real store (the one-transaction CAS of Commit and Rollback, and reads of
// the pointer as the API serves it) and checks the whole history with
// porcupine. Rounds start every client at once from the same view, so in
// each round N candidates compete for one expectation: exactly one CAS
// (commit or rollback) may win it. TOOLCRIB_FAULT_CAS_ROUNDS sets the
// number of rounds (default 30).
func TestPointerCASIsLinearizable(t *testing.T) {
	rounds := 30
	if v, err := strconv.Atoi(os.Getenv("TOOLCRIB_FAULT_CAS_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	const clients = 8
	f := newFixture(t)
	ctx := context.Background()
	const server, aud = "inv", "tenant-a.readers"
	h := &history{start: time.Now()}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	seed := rng.Uint64()
	t.Logf("seed %d", seed)

	read := func(client int) casOutput {
		call := h.now()
		p, err := f.st.ActivePointer(ctx, server, aud)
		out := casOutput{err: errName(err)}
		if err == nil {
			out.gen, out.rev, out.source = p.Generation, p.Revision, p.SourceRevision
			out.closed = p.State == discoveryv1.PointerState_POINTER_STATE_CLOSED
		}
		h.add(client, casInput{kind: opRead}, call, out)
		return out
	}
	var mu sync.Mutex
	wins := map[int]int{}   // round -> successful CAS operations
	casOps := map[int]int{} // round -> CAS operations
	for round := range rounds {
		view := read(0)
		exp := store.Expected{}
		if view.err == "" {
			exp = store.Expected{Generation: view.gen, Revision: view.rev}
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := range clients {
			rr := rand.New(rand.NewPCG(seed, uint64(round*clients+c)))
			// Most clients commit; some roll back; some only read.
			kind := opCommit
			switch x := rr.IntN(10); {
			case x < 2 && exp.Generation > 0:
				kind = opRollback
			case x < 3:
				kind = opRead
			}
			// Runs are started before the race: the CAS is what is timed.
			runID := ""
			if kind != opRead {
				casOps[round]++
			}
			if kind == opCommit {
				runID = f.run(t, server, aud)
			}
			wg.Go(func() {
				<-start
				switch kind {
				case opRead:
					read(c + 1)
				case opCommit:
					src := fmt.Sprintf("r%d-%d", round, c)
					in := casInput{kind: opCommit, expected: exp, source: src}
					call := h.now()
					res, err := f.st.Commit(ctx, store.Commit{RunID: runID, Expected: exp, Snapshot: snapshot(server, aud, src, 3, time.Hour),
						State: eligible, Run: store.RunEnd{SourceRevision: src, ToolCount: 3}})
					out := casOutput{err: errName(err)}
					if err == nil {
						out.gen, out.rev = res.Pointer.Generation, res.Pointer.Revision
						mu.Lock()
						wins[round]++
						mu.Unlock()
					}
					h.add(c+1, in, call, out)
				case opRollback:
					in := casInput{kind: opRollback, expected: store.Expected{Generation: exp.Generation}}
					call := h.now()
					res, err := f.st.Rollback(ctx, server, aud, exp.Generation, 0, "linearizability test")
					out := casOutput{err: errName(err)}
					if err == nil {
						out.gen, out.rev = res.Pointer.Generation, res.Pointer.Revision
						out.closed = res.Pointer.State == discoveryv1.PointerState_POINTER_STATE_CLOSED
						mu.Lock()
						wins[round]++
						mu.Unlock()
					}
					h.add(c+1, in, call, out)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	for _, op := range h.ops {
		if o := op.Output.(casOutput); o.err != "" && o.err != "conflict" && o.err != "closed" && o.err != "not found" {
			t.Fatalf("unexpected store error: %s", o.err)
		}
	}
	// Every round offered one expectation, read just before, to all its
	// CAS operations: exactly one wins it.
	for round := range rounds {
		if casOps[round] > 0 && wins[round] != 1 {
			t.Errorf("round %d: %d of %d CAS operations won one expectation, want exactly 1", round, wins[round], casOps[round])
		}
	}

	res, info := porcupine.CheckOperationsVerbose(pointerModel, h.ops, time.Minute)
	faultreport.Add(t, faultreport.CASChecks, 1)
	bad := int64(0)
	if res != porcupine.Ok {
		bad = 1
	}
	faultreport.Add(t, faultreport.CASNotLinearizable, bad)
	if res != porcupine.Ok {
		path := filepath.Join(t.TempDir(), "pointer-cas.html")
		if dir := os.Getenv(faultreport.DirEnv); dir != "" {
			path = filepath.Join(dir, "pointer-cas.html")
		}
		_ = porcupine.VisualizePath(pointerModel, info, path)
		t.Fatalf("the pointer CAS history of %d operations is %s (seed %d); visualization: %s", len(h.ops), res, seed, path)
	}
	commits := slices.IndexFunc(h.ops, func(op porcupine.Operation) bool {
		return op.Input.(casInput).kind == opCommit && op.Output.(casOutput).err == ""
	})
	if commits < 0 {
		t.Fatal("no commit won in the whole history: the test raced nothing")
	}
	t.Logf("%d operations over %d rounds: linearizable", len(h.ops), rounds)
}

// TestPointerModelRefusesWhatTheCASMustNotDo makes sure the model is not
// vacuous: histories the store must never produce are refused.
func TestPointerModelRefusesWhatTheCASMustNotDo(t *testing.T) {
	commit := func(client int, exp store.Expected, call, ret int64, out casOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: casInput{kind: opCommit, expected: exp, source: fmt.Sprint("r", client)}, Call: call, Output: out, Return: ret}
	}
	read := func(client int, call, ret int64, out casOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: casInput{kind: opRead}, Call: call, Output: out, Return: ret}
	}
	won := func(gen, rev int64) casOutput { return casOutput{gen: gen, rev: rev} }
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"two concurrent commits of one expectation both win", []porcupine.Operation{
			commit(0, store.Expected{}, 0, 10, won(1, 1)), commit(1, store.Expected{}, 0, 10, won(1, 2)),
		}, false},
		{"a read after a commit returned sees the old pointer", []porcupine.Operation{
			commit(0, store.Expected{}, 0, 10, won(1, 1)),
			commit(1, store.Expected{Generation: 1, Revision: 1}, 11, 20, won(2, 2)),
			read(2, 21, 30, casOutput{gen: 1, rev: 1, source: "r0"}),
		}, false},
		{"a commit loses although nothing moved the pointer", []porcupine.Operation{
			commit(0, store.Expected{}, 0, 10, won(1, 1)),
			commit(1, store.Expected{Generation: 1, Revision: 1}, 11, 20, casOutput{err: "conflict"}),
		}, false},
		{"a generation number is reused", []porcupine.Operation{
			commit(0, store.Expected{}, 0, 10, won(1, 1)),
			{ClientId: 1, Input: casInput{kind: opRollback, expected: store.Expected{Generation: 1}}, Call: 11, Return: 20, Output: casOutput{gen: 1, rev: 2, closed: true}},
			commit(2, store.Expected{Generation: 1, Revision: 2}, 21, 30, won(1, 3)),
		}, false},
		{"concurrent commits, one winner, reads on either side", []porcupine.Operation{
			read(0, 0, 5, casOutput{err: "not found"}),
			commit(1, store.Expected{}, 6, 20, won(1, 1)), commit(2, store.Expected{}, 6, 20, casOutput{err: "conflict"}),
			read(3, 7, 8, casOutput{err: "not found"}), read(0, 21, 22, casOutput{gen: 1, rev: 1, source: "r1"}),
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(pointerModel, tc.ops); got != tc.ok {
				t.Fatalf("linearizable = %v, want %v", got, tc.ok)
			}
		})
	}
}
