package changelog_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/postgres"
)

// BenchmarkCommitsThroughCounterRow measures how many transactions per
// second one Postgres commits when each appends to the change log (every
// writer queues on the counter row from the append to its commit, WAL
// flush included), against the same transactions writing a row of their
// own (no shared row: Postgres flushes concurrent commits together). The
// gap between the two at many writers is what ordering by one row costs;
// the "counter row" figure is the ceiling of catalog commits per second,
// whatever the number of discovery processes.
//
//	go test -run '^$' -bench CommitsThroughCounterRow -benchtime 2s ./platform/changelog/
func BenchmarkCommitsThroughCounterRow(b *testing.B) {
	for _, writers := range []int{1, 4, 16, 64} {
		for _, mode := range []string{"counter row", "own row"} {
			b.Run(fmt.Sprintf("%s/writers=%d", mode, writers), func(b *testing.B) {
				l, pool := newBenchLog(b, writers)
				ctx := context.Background()
				if _, err := pool.Exec(ctx, `CREATE TABLE own_rows (id bigint PRIMARY KEY, kind text, payload bytea)`); err != nil {
					b.Fatal(err)
				}
				payload := []byte(strings.Repeat("p", 300)) // an ACTIVATE change is about this size
				var next atomic.Int64
				b.SetParallelism((writers + 1) / 2) // GOMAXPROCS is 2 here
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
							if mode == "own row" {
								_, err := tx.Exec(ctx, `INSERT INTO own_rows VALUES ($1, 'test', $2)`, next.Add(1), payload)
								return err
							}
							_, _, err := l.Append(ctx, tx, "test", payload, nil)
							return err
						})
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			})
		}
	}
}

// newBenchLog is newLog with a pool as large as the writers.
func newBenchLog(b *testing.B, writers int) (*changelog.Log, *pgxpool.Pool) {
	b.Helper()
	_, small := newLog(b)
	url := small.Config().ConnString()
	small.Close()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	pool, err := postgres.Open(context.Background(), url+fmt.Sprintf("%spool_max_conns=%d", sep, writers+2), "cl")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return changelog.New(pool, "cl_changes", nil), pool
}
