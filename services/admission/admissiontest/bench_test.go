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
	"google.golang.org/protobuf/proto"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/schema"
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
	a := interleaved(inFlight, d, x, y)
	return a[0], a[1]
}

// interleaved measures the arms in turns, ten slices of d/10 each per arm,
// so all see the same background load over the same period.
func interleaved(inFlight int, d time.Duration, calls ...func(ctx context.Context, i int) error) []arm {
	lat := make([][]time.Duration, len(calls))
	took := make([]time.Duration, len(calls))
	errs := make([]int64, len(calls))
	for range 10 {
		for i, call := range calls {
			l, t, e := sample(inFlight, d/10, call)
			lat[i], took[i], errs[i] = append(lat[i], l...), took[i]+t, errs[i]+e
		}
	}
	out := make([]arm, len(calls))
	for i := range calls {
		out[i] = summarize(lat[i], took[i], errs[i])
	}
	return out
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
// TOOLCRIB_BENCH=1): a cached Check against its floor (the same server
// answering a CheckResponse of the same size through the same interceptors
// with no work: [checkFloor]) and grpc.health.v1.Health/Check on the same
// server, through the same client connection at the same concurrency (1,
// 16, 64 in flight), the three arms alternating in tenths of the duration
// so all see the same background load; the target is check_qps ≥ 0.9 ×
// floor_qps and check_p99 ≤ 1.5 × the floor's p99. Then Checks that miss L1 (answered
// from Redis) beside a bare Redis GET and a bare Postgres SELECT at 16 in
// flight. Beside the floor, the signed floor ([signedFloorMethod]): the
// floor plus the one Ed25519 signature every ALLOW needs. It reports; it
// never fails on time (a call that errors fails it).
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
	floor := &checkFloor{}
	a := Start(t, Options{Redis: true, Register: floor.register})
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
	// The floor answers what Check answered for the same request (and the
	// decision is cached from here on).
	first, err := ac.Check(context.Background(), req)
	if err != nil || first.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
		t.Fatalf("the first Check: %v %v %s", err, first.GetReason(), first.GetDetail())
	}
	if err := floor.set(first); err != nil {
		t.Fatalf("the floor: %v", err)
	}
	floor.receipts = a.Receipts
	var compiler schema.Compiler
	if floor.schema, err = compiler.Compile(generation.Tools[StatusTool].InputSchema); err != nil {
		t.Fatalf("the validated floor's schema: %v", err)
	}
	floorCall, signedCall, storedCall := floor.call(conn, req), floor.signedCall(conn, req), floor.storedCall(conn, req)
	validatedCall := floor.validatedCall(conn, req)
	for _, call := range []func(context.Context, int) error{floorCall, signedCall, storedCall, validatedCall} {
		if err := call(context.Background(), 0); err != nil {
			t.Fatalf("the floor: %v", err)
		}
	}
	for _, n := range []int{1, 16, 64} {
		load(n, d/5, check) // warm-up of every arm
		load(n, d/5, floorCall)
		load(n, d/5, signedCall)
		load(n, d/5, storedCall)
		load(n, d/5, validatedCall)
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
		arms := interleaved(n, d, check, floorCall, signedCall, health, storedCall, validatedCall)
		if profile {
			pprof.StopCPUProfile()
		}
		ca, fa, sa, ha, sta, va := arms[0], arms[1], arms[2], arms[3], arms[4], arms[5]
		if ca.errors > 0 || fa.errors > 0 || sa.errors > 0 || ha.errors > 0 || sta.errors > 0 || va.errors > 0 {
			t.Fatalf("in_flight=%d: %d Check, %d floor, %d signed floor, %d stored floor, %d validated floor and %d health calls failed", n, ca.errors, fa.errors, sa.errors, sta.errors, va.errors, ha.errors)
		}
		fmt.Printf("admission: in_flight=%d check_qps=%.0f floor_qps=%.0f health_qps=%.0f ratio_to_floor=%.2f check_p99_ms=%.3f floor_p99_ms=%.3f health_p99_ms=%.3f p99_to_floor=%.2f signed_floor_qps=%.0f ratio_to_signed_floor=%.2f signed_floor_p99_ms=%.3f p99_to_signed_floor=%.2f stored_floor_qps=%.0f ratio_to_stored_floor=%.2f stored_floor_p99_ms=%.3f p99_to_stored_floor=%.2f validated_floor_qps=%.0f ratio_to_validated_floor=%.2f validated_floor_p99_ms=%.3f p99_to_validated_floor=%.2f\n",
			n, ca.qps, fa.qps, ha.qps, ca.qps/fa.qps, ms(ca.p99), ms(fa.p99), ms(ha.p99), float64(ca.p99)/float64(fa.p99),
			sa.qps, ca.qps/sa.qps, ms(sa.p99), float64(ca.p99)/float64(sa.p99),
			sta.qps, ca.qps/sta.qps, ms(sta.p99), float64(ca.p99)/float64(sta.p99),
			va.qps, ca.qps/va.qps, ms(va.p99), float64(ca.p99)/float64(va.p99))
	}
	fmt.Println(cpuSplit(t, a, d, check, floorCall, signedCall, storedCall, validatedCall))
	fmt.Printf("  (%s per arm per concurrency, arms interleaved in tenths; floor = the same server answering a %d-byte CheckResponse through the same interceptors with no work; signed floor = the floor plus one Ed25519 signature over a %d-byte signing input (the size of the signed receipt's), the least the rules (every ALLOW signed) allow; stored floor = the signed floor plus the decision's receipt queued on Check's own receipts writer (a copy under a fresh time-ordered id; stored by its batched COPY), the least the rules (every ALLOW signed, every decision's receipt stored) allow but for the arguments; validated floor = the stored floor plus the arguments parsed under the caps and digested (RFC 8785) by Check's own parser and validated against the tool's input schema compiled once: every rule of a cached ALLOW (signed, stored, arguments checked on every call) and nothing else; cpu = per call, this process (client and server) and the Postgres backends of the receipts database; target ratio_to_floor >= 0.9, p99_to_floor <= 1.5; %s)\n",
		d, proto.Size(first), len(*floor.input.Load()), time.Now().UTC().Format(time.RFC3339))
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
