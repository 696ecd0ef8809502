package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
)

// leaseWorkers is the number of concurrent callers in each phase.
const leaseWorkers = 16

// leaseRounds and leaseSlice: the three arms (Issue, Verify, health) take
// turns, leaseSlice each, leaseRounds times, so a change in the load of a
// shared machine falls on all three alike; each arm's rate is its calls
// over its own time.
const (
	leaseRounds = 3
	leaseSlice  = time.Second
)

// TestLeaseThroughput measures the DESIGN §9 lease target through the real
// services (registry, discovery, admission, lease; Postgres and Redis):
// Issue by an admission receipt (GetReceipt over gRPC, the execution
// receipt committed), Verify of each issued lease once with a fresh holder
// proof (signature, proof, revocation and freeze read, freshness from the
// Watch follower, Redis SET NX), and the health Check of the same service
// as the baseline. `make bench-lease` prints the one line; the target is
// issue_qps and verify_qps ≥ 0.5 × health_qps. Never timed, never fails on
// speed. With TOOLCRIB_BENCH_PROFILE=<dir> the Issue and Verify slices
// write CPU profiles (every service runs in this process) to
// <dir>/lease-issue-<round>.pprof and <dir>/lease-verify-<round>.pprof,
// the health slices to <dir>/lease-health-<round>.pprof (`go tool pprof`
// merges several). A second line, `lease: floor …`, is
// what the rules alone cost (see [leaseFloor]).
func TestLeaseThroughput(t *testing.T) {
	if os.Getenv("TOOLCRIB_BENCH") == "" {
		t.Skip("a benchmark: run it with make bench-lease")
	}
	w := leaseworld.Start(t, time.Minute)
	alice := w.Lease["alice"]
	hc := healthpb.NewHealthClient(servicetest.Dial(t, w.LeaseAddr, ""))
	digest, err := lease.ArgumentDigest(leaseworld.ShipmentArgs)
	if err != nil {
		t.Fatal(err)
	}

	// A receipt is redeemed for one lease, so every Issue cites a fresh
	// one; the Checks that make them are admission's work, not Issue's, so
	// they run before the clock, leaseReceipts for each round (a worker
	// that finds none left stops, and the arm's time ends with the last).
	first := w.Allow(t, 1).GetReceipt().GetReceiptId()
	var issueArm, verifyArm, healthArm arm
	var lat []time.Duration
	issuedAll := 0
	for round := range leaseRounds {
		receipts := freshReceipts(t, w, leaseReceipts)
		var next atomic.Int64
		var mu sync.Mutex
		var issued []*leasev1.IssueResponse
		stopProfile := profile(t, fmt.Sprintf("lease-issue-%d", round))
		issueArm.add(phaseFor(t, leaseSlice, func(ctx context.Context, stop func() bool, done func()) error {
			var mine []*leasev1.IssueResponse
			for !stop() {
				i := next.Add(1) - 1
				if i >= int64(len(receipts)) {
					break
				}
				resp, err := alice.Issue(ctx, &leasev1.IssueRequest{ReceiptId: receipts[i], ArgumentDigest: digest,
					HolderPublicKey: w.JWK, Audience: leaseworld.Audience})
				if err != nil {
					return err
				}
				mine = append(mine, resp)
				done()
			}
			mu.Lock()
			issued = append(issued, mine...)
			mu.Unlock()
			return nil
		}))
		stopProfile()
		issuedAll += len(issued)

		// The holder proofs are the holder's work (an Ed25519 signature
		// each), which the health arm has no counterpart of: they are made
		// before the clock, right before the Verify slice (well inside the
		// proof window), which times the lease service's work only.
		proofs := make([]string, len(issued))
		for i, iss := range issued {
			c := iss.GetClaims()
			proofs[i], err = lease.NewProof(w.Holder, lease.Claims{ID: c.GetLeaseId(), ArgumentDigest: c.GetArgumentDigest(), Audience: c.GetAudience()}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
		}
		next.Store(0)
		stopProfile = profile(t, fmt.Sprintf("lease-verify-%d", round))
		verifyArm.add(phaseFor(t, leaseSlice, func(ctx context.Context, stop func() bool, done func()) error {
			var mine []time.Duration
			for !stop() {
				i := next.Add(1) - 1
				if i >= int64(len(issued)) {
					break
				}
				iss := issued[i]
				c := iss.GetClaims()
				start := time.Now()
				resp, err := alice.Verify(ctx, &leasev1.VerifyRequest{Token: iss.GetToken(), Proof: proofs[i], Audience: c.GetAudience(),
					ArgumentDigest: c.GetArgumentDigest(), ToolId: leaseworld.ToolID})
				if err != nil {
					return err
				}
				if !resp.GetValid() {
					return fmt.Errorf("lease %d refused: %v %s", i, resp.GetFailure(), resp.GetDetail())
				}
				mine = append(mine, time.Since(start))
				done()
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
			return nil
		}))
		stopProfile()

		stopProfile = profile(t, fmt.Sprintf("lease-health-%d", round))
		healthArm.add(phaseFor(t, leaseSlice, func(ctx context.Context, stop func() bool, done func()) error {
			for !stop() {
				if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
					return err
				}
				done()
			}
			return nil
		}))
		stopProfile()
	}
	if len(lat) == 0 {
		t.Fatal("no lease verified")
	}
	floor := measureLeaseFloor(t, hc, w.Adm["alice"], first)
	slices.Sort(lat)
	p99 := lat[(len(lat)*99)/100]
	issueQPS, verifyQPS, healthQPS := issueArm.qps(), verifyArm.qps(), healthArm.qps()
	fmt.Printf("lease: issue_qps=%.0f verify_qps=%.0f health_qps=%.0f verify_p99_ms=%.2f\n",
		issueQPS, verifyQPS, healthQPS, float64(p99.Microseconds())/1000)
	fmt.Printf("  (%d workers, %d rounds of %s per arm; %d leases issued, %d verified; target issue and verify >= 0.5 x health: %.2f and %.2f)\n",
		leaseWorkers, leaseRounds, leaseSlice, issuedAll, len(lat), issueQPS/healthQPS, verifyQPS/healthQPS)
	fmt.Println(floor)
}

// leaseReceipts is the ALLOW receipts made before each Issue slice: more
// than the lease service issues in leaseSlice on this machine.
const leaseReceipts = 8192

// freshReceipts makes n ALLOW receipts of alice's for shipment_status at
// generation 1, leaseWorkers Checks at a time.
func freshReceipts(t *testing.T, w *leaseworld.World, n int) []string {
	t.Helper()
	out := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range leaseWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				r := w.Check(t, "alice", 1, leaseworld.ShipmentArgs)
				if r.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
					t.Errorf("Check for a receipt: %v %s", r.GetReason(), r.GetDetail())
					return
				}
				out[i] = r.GetReceipt().GetReceiptId()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// arm adds up the calls and time of an arm's slices.
type arm struct {
	calls int64
	took  time.Duration
}

func (a *arm) add(calls int64, took time.Duration) { a.calls, a.took = a.calls+calls, a.took+took }

func (a arm) qps() float64 { return float64(a.calls) / a.took.Seconds() }

// phaseFor runs f on leaseWorkers goroutines until d passed (stop turns
// true) or every worker returned, and returns the calls (each done call
// counts one) and the time taken.
func phaseFor(t *testing.T, d time.Duration, f func(ctx context.Context, stop func() bool, done func()) error) (int64, time.Duration) {
	t.Helper()
	ctx := context.Background()
	var calls atomic.Int64
	start := time.Now()
	deadline := start.Add(d)
	stop := func() bool { return time.Now().After(deadline) }
	done := func() { calls.Add(1) }
	var wg sync.WaitGroup
	errs := make(chan error, leaseWorkers)
	for range leaseWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx, stop, done); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return calls.Load(), elapsed
}
