package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/stack"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// TestMain doubles as a discovery worker process for the scale-out case:
// the benchmark starts this binary again with [discoverytest.ChildEnv] set.
func TestMain(m *testing.M) {
	if discoverytest.RunChild() {
		return
	}
	os.Exit(m.Run())
}

// Scale-out: 8,000 servers / 50,000 tools crawled by 1, 2 and 4 discovery
// processes sharing one Postgres queue and one database.
//
// Process 1 is the stack's discovery, in this process with the registry and
// the fixture fleet; processes 2 to 4 are this test binary started again
// (discoverytest.StartChild), each its own OS process with its own Go
// runtime, connection pool and River client. Separate OS processes rather
// than more Run instances in this process: what the case must show is
// whether independent workers contend on the queue and the change-log
// counter row, and a second Run in one process would share the garbage
// collector and the scheduler with the fixtures, hiding what a deployed
// worker costs. cpu_s is the CPU of every process (this one: registry,
// fixtures, discovery 1; the children) during the crawl; pg_cpu_s that of
// the Postgres backends serving the benchmark's database.
const (
	scaleServers   = 8000
	scaleTools     = 50_000
	scaleWorkers   = 32 // per process, as the other cases
	scaleProcesses = 4
)

func scaleOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	servers, tools := scaleServers, scaleTools
	// A smaller fleet of the same shape for a quick look while developing
	// (the printed line says which was run).
	if v, err := strconv.Atoi(os.Getenv("TOOLCRIB_BENCH_SCALEOUT_SERVERS")); err == nil && v > 0 && v < scaleServers {
		servers, tools = v, v*scaleTools/scaleServers
	}
	fleet, err := fixture.StartFleet(fixture.FleetScripts(servers, tools, 4, 2), fixture.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	ids := make([]string, servers)
	for i := range ids {
		ids[i] = fmt.Sprintf("srv-%04d", i)
	}
	for _, n := range []int{1, 2, scaleProcesses} {
		t.Run(fmt.Sprintf("processes=%d", n), func(t *testing.T) {
			st := startStack(t)
			registerParallel(ctx, t, st, ids, fleet.URLs)
			common := st.Auth.Common(t, st.PostgresURL, false, nil)
			var children []int
			for i := 1; i < n; i++ {
				_, cmd := discoverytest.StartChild(t, discoverytest.Child{PostgresURL: st.PostgresURL, JWKS: st.Auth.JWKSPath,
					TokenFile: common.ServiceTokenFile, RegistryAddr: st.RegistryAddr, Worker: fmt.Sprintf("bench-%d", i+1),
					Workers: scaleWorkers, NoLinger: true})
				children = append(children, cmd.Process.Pid)
			}
			pg := newPGMeter(ctx, t, st.PostgresURL)
			c0, k0 := cpuSeconds(), childCPU(children)
			took := crawlOrdered(ctx, t, st, ids)
			cpu := cpuSeconds() - c0 + childCPU(children) - k0
			pgCPU := pg.since(ctx, t)
			workers := countWorkers(ctx, t, st.PostgresURL)
			fmt.Printf("discovery: servers=%d processes=%d seconds=%.2f commits_per_s=%.0f cpu_s=%.2f\n",
				servers, n, took.Seconds(), float64(servers)/took.Seconds(), cpu)
			fmt.Printf("  (tools %d; %d worker processes committed runs; postgres backends of this database: cpu %.2f s; cores busy: %.2f of 2)\n",
				tools, workers, pgCPU, (cpu+pgCPU)/took.Seconds())
		})
	}
}

// registerParallel is [register] from 16 callers at once (8,000 servers).
func registerParallel(ctx context.Context, t *testing.T, st *stack.Stack, ids, urls []string) {
	t.Helper()
	const callers = 16
	var wg sync.WaitGroup
	for w := range callers {
		wg.Go(func() {
			var mine, theirs []string
			for i := w; i < len(ids); i += callers {
				mine, theirs = append(mine, ids[i]), append(theirs, urls[i])
			}
			registerServers(ctx, t, st, mine, theirs)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for from := 0; from < len(ids); from += classServers {
		putClass(ctx, t, st, classOf(from), ids[from:min(from+classServers, len(ids))])
	}
}

// classServers is the most servers one audience class binds (the
// registry's limit); the fleet is spread over classes of that size.
const classServers = 1000

// classOf is the audience class of the i-th server.
func classOf(i int) string { return fmt.Sprintf("%s-%d", class, i/classServers) }

// crawlOrdered is [crawl] that also checks, on the Watch stream it waits
// on, that revisions arrive gap-free and in order while several processes
// commit: every commit of the crawl is one revision, none skipped.
func crawlOrdered(ctx context.Context, t *testing.T, st *stack.Stack, ids []string) time.Duration {
	t.Helper()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	stream, err := st.Discovery.Watch(wctx, &discoveryv1.WatchRequest{FromRevision: 0})
	if err != nil {
		t.Fatal(err)
	}
	want := make(map[string]bool, len(ids))
	for i, id := range ids {
		want[id+" "+classOf(i)] = true
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(ids); i += 8 {
				if _, err := st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: ids[i], AudienceClass: classOf(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var last int64
	for len(want) > 0 {
		msg, err := stream.Recv()
		if err != nil {
			t.Fatalf("watch: %d pointers still inactive: %v", len(want), err)
		}
		c := msg.GetChange()
		if c == nil {
			continue
		}
		if last != 0 && c.GetRevision() != last+1 {
			t.Fatalf("watch: revision %d after %d: a gap or a reorder", c.GetRevision(), last)
		}
		last = c.GetRevision()
		if p := c.GetPointer(); p.GetState() == discoveryv1.PointerState_POINTER_STATE_ACTIVE {
			delete(want, p.GetServerId()+" "+p.GetAudienceClass())
		}
	}
	took := time.Since(start)
	wg.Wait()
	return took
}

// countWorkers returns how many distinct worker processes ended runs
// that committed (each must have taken part for the line to mean
// anything).
func countWorkers(ctx context.Context, t *testing.T, url string) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(DISTINCT worker) FROM discovery.runs WHERE generation > 0`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// childCPU is the user+system CPU of the processes, in seconds, read from
// /proc (the children are still running, so getrusage cannot see them).
func childCPU(pids []int) float64 {
	total := 0.0
	for _, pid := range pids {
		total += procCPU(pid)
	}
	return total
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64) // utime, field 14
	k, _ := strconv.ParseFloat(f[12], 64) // stime, field 15
	return (u + k) / clockTicks
}

// pgMeter measures the CPU of the Postgres backends connected to one
// database (they are processes on this machine).
type pgMeter struct {
	db    string
	conn  *pgx.Conn
	start map[int]float64
}

func newPGMeter(ctx context.Context, t *testing.T, url string) *pgMeter {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	m := &pgMeter{db: conn.Config().Database, conn: conn}
	m.start = m.sample(ctx, t)
	return m
}

func (m *pgMeter) sample(ctx context.Context, t *testing.T) map[int]float64 {
	t.Helper()
	rows, err := m.conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1`, m.db)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int]float64, len(pids))
	for _, p := range pids {
		out[int(p)] = procCPU(int(p))
	}
	return out
}

// since returns the CPU the database's backends used since the meter
// started (a backend that exited meanwhile is not counted).
func (m *pgMeter) since(ctx context.Context, t *testing.T) float64 {
	t.Helper()
	total := 0.0
	for pid, cpu := range m.sample(ctx, t) {
		total += cpu - m.start[pid]
	}
	return total
}
