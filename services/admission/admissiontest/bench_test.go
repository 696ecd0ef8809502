package admissiontest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// arm is one measured load: qps and p99 of call under inFlight callers.
type arm struct {
	qps    float64
	p99    time.Duration
	errors int64
}

// load runs call from inFlight goroutines for d and measures it.
func load(inFlight int, d time.Duration, call func(ctx context.Context, i int) error) arm {
	return summarize(sample(inFlight, d, call))
}

// paired measures two arms in alternating slices of d/10 each, so both see
// the same background load (the machine is shared) over the same period.
func paired(inFlight int, d time.Duration, x, y func(ctx context.Context, i int) error) (arm, arm) {
	var lx, ly []time.Duration
	var tx, ty time.Duration
	var ex, ey int64
	for range 10 {
		l, took, errs := sample(inFlight, d/10, x)
		lx, tx, ex = append(lx, l...), tx+took, ex+errs
		l, took, errs = sample(inFlight, d/10, y)
		ly, ty, ey = append(ly, l...), ty+took, ey+errs
	}
	return summarize(lx, tx, ex), summarize(ly, ty, ey)
}

func summarize(lat []time.Duration, took time.Duration, errs int64) arm {
	slices.Sort(lat)
	a := arm{qps: float64(len(lat)) / took.Seconds(), errors: errs}
	if len(lat) > 0 {
		a.p99 = lat[(len(lat)*99+99)/100-1]
	}
	return a
}

// sample runs call from inFlight goroutines for d: every call's latency,
// the wall time taken and the failed calls.
func sample(inFlight int, d time.Duration, call func(ctx context.Context, i int) error) ([]time.Duration, time.Duration, int64) {
	ctx := context.Background()
	var wg sync.WaitGroup
	lat := make([][]time.Duration, inFlight)
	var errs atomic.Int64
	stop := time.Now().Add(d)
	start := time.Now()
	for g := range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				t0 := time.Now()
				if err := call(ctx, g+i); err != nil {
					errs.Add(1)
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	return slices.Concat(lat...), time.Since(start), errs.Load()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// TestBenchAdmission is `make bench-admission`'s admission lines (set
// TOOLCRIB_BENCH=1): a cached Check against grpc.health.v1.Health/Check on
// the same server, through the same client connection at the same
// concurrency (1, 16, 64 in flight), the two arms alternating in tenths of
// the duration so both see the same background load; then Checks that miss L1 (answered
// from Redis) beside a bare Redis GET and a bare Postgres SELECT at 16 in
// flight. It reports; it never fails on time (a call that errors fails it).
// TOOLCRIB_BENCH_PROFILE=dir writes the CPU profile of the paired arms at
// 16 in flight (client and server are this process; the Check's share is
// under _AdmissionService_Check_Handler).
func TestBenchAdmission(t *testing.T) {
	if os.Getenv("TOOLCRIB_BENCH") == "" {
		t.Skip("set TOOLCRIB_BENCH=1 (make bench-admission)")
	}
	d := 2 * time.Second
	if v, err := time.ParseDuration(os.Getenv("TOOLCRIB_BENCH_DURATION")); err == nil && v > 0 {
		d = v
	}
	a := Start(t, Options{Redis: true})
	conn := servicetest.Dial(t, a.Addr, a.Auth.User(t, User, Tenant))
	ac, hc := admissionv1.NewAdmissionServiceClient(conn), healthpb.NewHealthClient(conn)
	req := &admissionv1.CheckRequest{ToolId: StatusTool, Generation: Generation, DescriptorDigest: StatusDigest,
		PolicyEpoch: Epoch, Arguments: []byte(`{"shipment_id":"S-1042"}`), Mode: admissionv1.Mode_MODE_AUTONOMOUS}
	check := func(ctx context.Context, _ int) error {
		resp, err := ac.Check(ctx, req)
		if err == nil && resp.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
			err = fmt.Errorf("%v: %s", resp.GetReason(), resp.GetDetail())
		}
		return err
	}
	health := func(ctx context.Context, _ int) error {
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(context.Background(), 0); err != nil { // the decision is cached from here on
		t.Fatal(err)
	}
	for _, n := range []int{1, 16, 64} {
		load(n, d/5, check) // warm-up of both arms
		load(n, d/5, health)
		profile := n == 16 && os.Getenv("TOOLCRIB_BENCH_PROFILE") != ""
		if profile {
			f, err := os.Create(filepath.Join(os.Getenv("TOOLCRIB_BENCH_PROFILE"), "admission-check.pprof"))
			if err != nil {
				t.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				t.Fatal(err)
			}
			defer f.Close()
		}
		ca, ha := paired(n, d, check, health)
		if profile {
			pprof.StopCPUProfile()
		}
		if ca.errors > 0 || ha.errors > 0 {
			t.Fatalf("in_flight=%d: %d Check and %d health calls failed", n, ca.errors, ha.errors)
		}
		fmt.Printf("admission: in_flight=%d check_qps=%.0f health_qps=%.0f ratio=%.2f check_p99_ms=%.3f health_p99_ms=%.3f\n",
			n, ca.qps, ha.qps, ca.qps/ha.qps, ms(ca.p99), ms(ha.p99))
	}
	l1Miss(t, d)
}

// l1Miss measures Checks whose decision is never taken from L1 (each
// lookup is answered by Redis), and the bare reads they stand beside, at 16
// in flight.
func l1Miss(t *testing.T, d time.Duration) {
	const n = 16
	a := Start(t, Options{Redis: true, SkipL1: true})
	conn := servicetest.Dial(t, a.Addr, a.Auth.User(t, User, Tenant))
	ac := admissionv1.NewAdmissionServiceClient(conn)
	reqs := [2]*admissionv1.CheckRequest{}
	for i, m := range []admissionv1.Mode{admissionv1.Mode_MODE_AUTONOMOUS, admissionv1.Mode_MODE_USER_CONFIRMED} {
		reqs[i] = &admissionv1.CheckRequest{ToolId: StatusTool, Generation: Generation, DescriptorDigest: StatusDigest,
			PolicyEpoch: Epoch, Arguments: []byte(`{"shipment_id":"S-1042"}`), Mode: m}
	}
	// The user-confirmed half is asserted by a confirmer, as the gateway's
	// are (the header is not read for the autonomous half).
	confirmer := grpc.PerRPCCredentials(principal.ConfirmerToken(a.Auth.Confirmer(t)))
	check := func(ctx context.Context, i int) error {
		resp, err := ac.Check(ctx, reqs[i%2], grpc.WaitForReady(true), confirmer)
		if err == nil && resp.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
			err = fmt.Errorf("%v: %s", resp.GetReason(), resp.GetDetail())
		}
		return err
	}
	for i := range 2 {
		if err := check(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // the L2 writes are queued
	load(n, d/5, check)
	before := a.CacheAnswers()
	ca := load(n, d, check)
	after := a.CacheAnswers()

	key := a.Redis.Key("bench", "k")
	if err := a.Redis.Set(context.Background(), key, `{"r":1,"x":"2099-01-01T00:00:00Z"}`, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	ra := load(n, d, func(ctx context.Context, _ int) error { return a.Redis.Get(ctx, key).Err() })

	pool, err := postgres.Open(context.Background(), a.PostgresURL, "admission")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pa := load(n, d, func(ctx context.Context, _ int) error {
		var id string
		err := pool.QueryRow(ctx, `SELECT $1::text`, "r-1").Scan(&id)
		return err
	})
	if ca.errors+ra.errors+pa.errors > 0 {
		t.Fatalf("failed calls: check %d, redis %d, postgres %d", ca.errors, ra.errors, pa.errors)
	}
	l2 := after["l2"] - before["l2"]
	total := l2 + after["l1"] - before["l1"] + after["miss"] - before["miss"]
	fmt.Printf("admission: l1_miss check_qps=%.0f redis_get_qps=%.0f pg_select_qps=%.0f check_p99_ms=%.3f l2_share=%.2f\n",
		ca.qps, ra.qps, pa.qps, ms(ca.p99), float64(l2)/float64(max(total, 1)))
}
