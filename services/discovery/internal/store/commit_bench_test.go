package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// BenchmarkCatalogCommits measures catalog commits per second through the
// store (pointer CAS, snapshot with 6 tools, run end, change-log append)
// with 1 to 64 commits in flight, each of a pointer of its own, as a fleet's
// first crawl makes them. cpu-us/commit is the CPU this process (the
// store's client side, not Postgres) spent per commit.
//
//	go test -run '^$' -bench CatalogCommits -benchtime 2000x ./services/discovery/internal/store/
func BenchmarkCatalogCommits(b *testing.B) {
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			f := newFixture(b)
			url := f.pool.Config().ConnString()
			sep := "?"
			if strings.Contains(url, "?") {
				sep = "&"
			}
			pool, err := postgres.Open(context.Background(), url+fmt.Sprintf("%spool_max_conns=%d", sep, writers+4), store.Schema)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(pool.Close)
			st := store.New(pool, f.log)
			ctx := context.Background()
			runs := make([]string, b.N)
			for i := range runs {
				runs[i] = f.run(b, fmt.Sprintf("srv-%06d", i), "a.readers")
			}
			var next atomic.Int64
			b.SetParallelism((writers + 1) / 2) // GOMAXPROCS is 2 here
			b.ResetTimer()
			c0 := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := int(next.Add(1) - 1)
					server := fmt.Sprintf("srv-%06d", i)
					if _, err := st.Commit(ctx, store.Commit{RunID: runs[i], Snapshot: snapshot(server, "a.readers", "r1", 6, time.Hour),
						State: eligible, Run: store.RunEnd{SourceRevision: "r1", ToolCount: 6,
							Pages: []crawl.Page{{Index: 0, ToolCount: 6, Digest: "sha256:x", ReceivedAt: time.Now()}}}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			b.ReportMetric((processCPU()-c0).Seconds()*1e6/float64(b.N), "cpu-us/commit")
		})
	}
}

// processCPU is the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
