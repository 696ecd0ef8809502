package discovery_test

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// TestScaleProfile crawls, validates and commits the two DESIGN §9 shapes
// through the real workers and streamable HTTP on loopback, and prints how
// long each took. It is a profile, not a timed test: it only runs with
// TOOLCRIB_DISCOVERY_SCALE=1 and never fails on time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func TestScaleProfile(t *testing.T) {
	if os.Getenv("TOOLCRIB_DISCOVERY_SCALE") == "" {
		t.Skip("set TOOLCRIB_DISCOVERY_SCALE=1 to run")
	}
	t.Run("800 servers", func(t *testing.T) {
		e := start(t, func(c *discovery.Config) { c.Workers = 32; c.Linger = 0 })
		const servers, tools = 800, 5000
		var keys []discovery.PointerKey
		for i := range servers {
			n := tools / servers
			if i < tools%servers {
				n++
			}
			cat := discoverytest.NewCatalog("r-1", 100, discoverytest.Tools(fmt.Sprintf("s%d", i), n)...)
			srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
			id := fmt.Sprintf("srv-%03d", i)
			e.register(id, srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
			keys = append(keys, discovery.PointerKey{ServerID: id, AudienceClass: class})
		}
		t0, c0 := time.Now(), cpuSeconds()
		// Trigger from 8 callers at once, like an operator script would.
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < len(keys); i += 8 {
					e.scan(keys[i].ServerID, keys[i].AudienceClass)
				}
			})
		}
		wg.Wait()
		fmt.Printf("triggered in %.2fs\n", time.Since(t0).Seconds())
		if _, err := discovery.WaitPointers(ctxT(t), e.admin, 0, keys, nil); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("discovery: servers=%d tools=%d seconds=%.2f (cpu %.2f s in this process, servers included)\n", servers, tools, time.Since(t0).Seconds(), cpuSeconds()-c0)
		if pool, err := pgxpool.New(ctxT(t), e.url); err == nil {
			var avg, p90 float64
			_ = pool.QueryRow(ctxT(t), `SELECT avg(extract(epoch FROM finished_at - started_at)), percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at)) FROM discovery.runs`).Scan(&avg, &p90)
			fmt.Printf("run seconds: avg %.3f p90 %.3f\n", avg, p90)
			pool.Close()
		}
	})
	t.Run("one large server", func(t *testing.T) {
		e := start(t, func(c *discovery.Config) { c.Linger = 0 })
		cat := discoverytest.NewCatalog("r-1", 100, discoverytest.Tools("t", 100_000)...)
		srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
		e.register("large", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
		t0, c0 := time.Now(), cpuSeconds()
		r := e.scanAndWait("large", class)
		want(t, r, eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
		fmt.Printf("discovery: servers=1 tools=100000 pages=%d seconds=%.2f (cpu %.2f s in this process, server included)\n", r.GetPageCount(), time.Since(t0).Seconds(), cpuSeconds()-c0)
	})
}
