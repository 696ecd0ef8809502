package changelog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
)

func newLog(t testing.TB) (*changelog.Log, *pgxpool.Pool) {
	t.Helper()
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "cl", Sets: []postgres.Set{changelog.Migrations()}})
	pool, err := postgres.Open(context.Background(), url, "cl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return changelog.New(pool, "cl_changes", slog.New(slog.NewTextHandler(io.Discard, nil))), pool
}

func appendOne(ctx context.Context, l *changelog.Log, pool *pgxpool.Pool, payload string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, _, err := l.Append(ctx, tx, "test", []byte(payload), nil)
		return err
	})
}

// Concurrent writers: a watcher sees every committed change exactly once,
// in revision order, with no gap; a rolled-back change takes no revision.
func TestWatchSeesEveryChangeInOrder(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, pool := newLog(t)
	go l.Listen(ctx)

	const writers, each = 8, 25
	var got []int64
	var mu sync.Mutex
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- l.Watch(ctx, 0, 50*time.Millisecond, func(ev changelog.Event) error {
			if ev.Entry == nil {
				return nil
			}
			mu.Lock()
			got = append(got, ev.Entry.Revision)
			n := len(got)
			mu.Unlock()
			if n == writers*each {
				return io.EOF
			}
			return nil
		})
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := appendOne(ctx, l, pool, fmt.Sprintf("%d/%d", w, i)); err != nil {
					t.Error(err)
				}
				// A rolled-back append must not leave a gap.
				_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if _, _, err := l.Append(ctx, tx, "test", []byte("rolled back"), nil); err != nil {
						return err
					}
					return errors.New("roll back")
				})
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-watchDone:
		if !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watcher did not see every change")
	}
	for i, rev := range got {
		if rev != int64(i+1) {
			t.Fatalf("position %d has revision %d: gap or reorder", i, rev)
		}
	}
	entries, err := l.Read(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if string(e.Payload) == "rolled back" {
			t.Fatal("a rolled-back change is in the log")
		}
	}
}

// Resuming from a revision delivers exactly the changes after it; resuming
// from a compacted revision fails with ErrCompacted; from the future with
// ErrAhead; heartbeats report the head.
func TestWatchResumeCompactionAndHeartbeat(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, pool := newLog(t)
	for i := range 10 {
		if err := appendOne(ctx, l, pool, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	var revs []int64
	var heartbeat int64
	err := l.Watch(ctx, 6, 20*time.Millisecond, func(ev changelog.Event) error {
		if ev.Entry != nil {
			revs = append(revs, ev.Entry.Revision)
			return nil
		}
		heartbeat = ev.Head
		return io.EOF
	})
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if fmt.Sprint(revs) != "[7 8 9 10]" || heartbeat != 10 {
		t.Fatalf("resumed revisions %v heartbeat %d, want [7 8 9 10] and 10", revs, heartbeat)
	}
	n, err := l.Compact(ctx, time.Now().Add(time.Hour), 3)
	if err != nil {
		t.Fatal(err)
	}
	if n != 7 {
		t.Fatalf("compacted %d entries, want 7", n)
	}
	err = l.Watch(ctx, 5, time.Second, func(changelog.Event) error { return nil })
	if !errors.Is(err, changelog.ErrCompacted) {
		t.Fatalf("resume from compacted revision: %v", err)
	}
	err = l.Watch(ctx, 11, time.Second, func(changelog.Event) error { return nil })
	if !errors.Is(err, changelog.ErrAhead) {
		t.Fatalf("resume from the future: %v", err)
	}
	// Revisions 8 to 10 are kept: resuming from 7 needs nothing compacted.
	revs = nil
	err = l.Watch(ctx, 7, 20*time.Millisecond, func(ev changelog.Event) error {
		if ev.Entry == nil {
			return io.EOF
		}
		revs = append(revs, ev.Entry.Revision)
		return nil
	})
	if !errors.Is(err, io.EOF) || fmt.Sprint(revs) != "[8 9 10]" {
		t.Fatalf("resume from oldest kept: %v %v", revs, err)
	}
}

// Appends of many changes in one statement, mixed with single appends and
// rolled-back ones from concurrent writers: the log stays gapless, each
// call's changes take consecutive revisions in the order given (each
// change told its own), and every change keeps its kind, payload and
// tenants.
func TestAppendManyTakesConsecutiveRevisionsInOrder(t *testing.T) {
	ctx := context.Background()
	l, pool := newLog(t)
	const writers, each = 6, 15
	type wrote struct {
		rev     int64
		payload string
		tenants []string
	}
	var mu sync.Mutex
	var all []wrote
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				n := 1 + (w+i)%4
				changes, revs := make([]*changelog.Change, n), make([]int64, n)
				for j := range changes {
					changes[j] = &changelog.Change{Kind: "many", Payload: fmt.Appendf(nil, "%d/%d/%d", w, i, j), Revision: &revs[j]}
					switch j % 3 {
					case 1:
						changes[j].Tenants = []string{"t-" + fmt.Sprint(w)}
					case 2:
						changes[j].Tenants = []string{"t-a", "t-b"}
					}
				}
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if i%2 == 1 {
						if _, _, err := l.Append(ctx, tx, "one", fmt.Appendf(nil, "%d/%d/one", w, i), nil); err != nil {
							return err
						}
					}
					var b pgx.Batch
					if err := l.QueueAppendMany(&b, changes); err != nil {
						return err
					}
					return tx.SendBatch(ctx, &b).Close()
				})
				if err != nil {
					t.Error(err)
					return
				}
				for j, c := range changes {
					if j > 0 && revs[j] != revs[j-1]+1 {
						t.Errorf("writer %d call %d: revisions %d then %d", w, i, revs[j-1], revs[j])
					}
					mu.Lock()
					all = append(all, wrote{rev: revs[j], payload: string(c.Payload), tenants: c.Tenants})
					mu.Unlock()
				}
				// A rolled-back many-append takes no revision.
				_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					var b pgx.Batch
					if err := l.QueueAppendMany(&b, []*changelog.Change{{Kind: "many", Payload: []byte("rolled back")}, {Kind: "many", Payload: []byte("rolled back")}}); err != nil {
						return err
					}
					if err := tx.SendBatch(ctx, &b).Close(); err != nil {
						return err
					}
					return errors.New("roll back")
				})
			}
		})
	}
	wg.Wait()
	entries, err := l.Read(ctx, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	byRev := map[int64]changelog.Entry{}
	for i, e := range entries {
		if e.Revision != int64(i+1) {
			t.Fatalf("position %d has revision %d: gap or reorder", i, e.Revision)
		}
		if string(e.Payload) == "rolled back" {
			t.Fatal("a rolled-back change is in the log")
		}
		byRev[e.Revision] = e
	}
	if want := writers*(each/2) + len(all); len(entries) != want {
		t.Fatalf("%d entries, want %d", len(entries), want)
	}
	for _, w := range all {
		e, ok := byRev[w.rev]
		if !ok || e.Kind != "many" || string(e.Payload) != w.payload || fmt.Sprint(e.Tenants) != fmt.Sprint(nonNilStrings(w.tenants)) {
			t.Fatalf("revision %d: %+v, want payload %s tenants %v", w.rev, e, w.payload, w.tenants)
		}
	}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Writes added to the append's statement read its last revision as
// (SELECT revision FROM r) and their arguments from $6 on: each row
// stamped with its change's revision (the last - n + its ordinal) is
// written with the changes, and with them rolled back.
func TestAppendManyWithWritesInTheSameStatement(t *testing.T) {
	ctx := context.Background()
	l, pool := newLog(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE stamped (name text PRIMARY KEY, revision bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	const with = `st AS (INSERT INTO stamped (name, revision)
  SELECT u.name, (SELECT revision FROM r) - $7 + u.ord FROM unnest($6::text[]) WITH ORDINALITY AS u(name, ord))`
	appendStamped := func(names []string, rollback bool) []int64 {
		revs := make([]int64, len(names))
		changes := make([]*changelog.Change, len(names))
		for i, n := range names {
			changes[i] = &changelog.Change{Kind: "stamped", Payload: []byte(n), Revision: &revs[i]}
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var b pgx.Batch
			if err := l.QueueAppendManyWith(&b, changes, with, names, len(names)); err != nil {
				return err
			}
			if err := tx.SendBatch(ctx, &b).Close(); err != nil {
				return err
			}
			if rollback {
				return errors.New("roll back")
			}
			return nil
		})
		if err != nil && !rollback {
			t.Fatal(err)
		}
		return revs
	}
	first := appendStamped([]string{"a", "b", "c"}, false)
	appendStamped([]string{"x", "y"}, true)
	second := appendStamped([]string{"d"}, false)
	if fmt.Sprint(first, second) != "[1 2 3] [4]" {
		t.Fatalf("revisions %v %v, want [1 2 3] [4]", first, second)
	}
	rows, err := pool.Query(ctx, `SELECT s.name, s.revision, convert_from(c.payload, 'UTF8') FROM stamped s
LEFT JOIN changes c USING (revision) ORDER BY s.revision`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var name, payload string
		var rev int64
		if err := rows.Scan(&name, &rev, &payload); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s@%d=%s", name, rev, payload))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[a@1=a b@2=b c@3=c d@4=d]" {
		t.Fatalf("stamped rows %v", got)
	}
}
