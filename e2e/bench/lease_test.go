package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
	leasesvc "github.com/toolcrib/toolcrib/services/lease"
)

// leaseWorkers is the number of concurrent callers in each phase.
const leaseWorkers = 16

// leaseRounds and leaseSlice: the arms (Issue and its two floors, Verify,
// Redeem, their floors, health) take turns, leaseSlice each, leaseRounds
// times, so a change in the load of a shared machine falls on all alike;
// each arm's rate is its calls over its own time. Eight rounds (each
// order of [issueOrders] twice): the same bench's ratios moved by ±0.06
// from run to run with three.
const (
	leaseRounds = 8
	leaseSlice  = time.Second
)

// issueOrders is the order of the Issue slice (I) and its floors' (F, R)
// in each round: every order in which Issue is not last (Issue is never
// last, so that the receipts it cites, made before the three, are well
// inside their validity), so each floor takes each place, and the slice
// right after the receipts were made (and stored) is not always Issue's.
var issueOrders = []string{"IFR", "FIR", "IRF", "RIF"}

// redeem is the Redeem arm's one call, made by an executor (a service
// identity) for a lease it verified offline, as the executor kit does.
func redeem(ctx context.Context, c leasev1.LeaseServiceClient, claims *leasev1.LeaseClaims) error {
	resp, err := c.Redeem(ctx, &leasev1.RedeemRequest{Claims: claims})
	if err == nil && !resp.GetValid() {
		err = fmt.Errorf("redeem refused: %v %s", resp.GetFailure(), resp.GetDetail())
	}
	return err
}

// TestLeaseThroughput measures the lease targets of issue 24 through the
// real services (registry, discovery, admission, lease; Postgres and
// Redis), each against its floor measured in the same run on the same
// lease server ([leaseFloors]: the same RPC through the same interceptors,
// a response of the same size, only the work the rules require): Issue by
// an admission receipt (the execution receipt committed), Redeem by an
// executor of a lease it verified (see [redeem]), Verify of each issued
// lease once with a fresh holder proof (signature, proof, revocation and
// freeze read, freshness from the Watch follower, Redis SET NX), and the
// health Check of the same service. The arms take turns, leaseSlice each,
// leaseRounds times. `make bench-lease` prints the line; the target is
// each ratio to its floor ≥ 0.8, Issue's against its receipt floor (the
// first Issue floor records no claim: below what the rules allow, printed
// beside it). Never timed, never fails on speed. With
// TOOLCRIB_BENCH_PROFILE=<dir> the Issue and Verify slices write CPU
// profiles (every service runs in this process) to
// <dir>/lease-issue-<round>.pprof, <dir>/lease-issue-floor-<round>.pprof
// and <dir>/lease-issue-receipt-floor-<round>.pprof (its floors') and
// <dir>/lease-verify-<round>.pprof,
// the health slices to <dir>/lease-health-<round>.pprof (`go tool pprof`
// merges several).
func TestLeaseThroughput(t *testing.T) {
	if os.Getenv("TOOLCRIB_BENCH") == "" {
		t.Skip("a benchmark: run it with make bench-lease")
	}
	floors, err := newLeaseFloors()
	if err != nil {
		t.Fatal(err)
	}
	w := leaseworld.StartWith(t, leaseworld.Options{CacheTTL: time.Minute,
		LeaseService: func(c *leasesvc.Config) { c.Extra = floors.register }})
	alice := w.Lease["alice"]
	aliceConn := w.St.Auth.Dial(t, w.LeaseAddr, w.St.Auth.User(t, "alice", leaseworld.Tenant, "readers"))
	executorConn := w.St.Auth.Dial(t, w.LeaseAddr, w.St.Auth.Service(t))
	executor := leasev1.NewLeaseServiceClient(executorConn)
	hc := healthpb.NewHealthClient(servicetest.Dial(t, w.LeaseAddr, ""))
	digest, err := lease.ArgumentDigest(leaseworld.ShipmentArgs)
	if err != nil {
		t.Fatal(err)
	}
	issueReq := func(receipt string) *leasev1.IssueRequest {
		return &leasev1.IssueRequest{SignedReceipt: receipt, ArgumentDigest: digest, HolderPublicKey: w.JWK, Audience: leaseworld.Audience}
	}
	verifyReq := func(iss *leasev1.IssueResponse, proof string) *leasev1.VerifyRequest {
		c := iss.GetClaims()
		return &leasev1.VerifyRequest{Token: iss.GetToken(), Proof: proof, Audience: c.GetAudience(),
			ArgumentDigest: c.GetArgumentDigest(), ToolId: leaseworld.ToolID}
	}
	proofFor := func(iss *leasev1.IssueResponse) string {
		c := iss.GetClaims()
		p, err := lease.NewProof(w.Holder, lease.Claims{ID: c.GetLeaseId(), ArgumentDigest: c.GetArgumentDigest(), Audience: c.GetAudience()}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// The floors answer what the real RPCs answered: one lease issued and
	// verified before the clock. Their requests are the real ones too.
	ctx := context.Background()
	sampleIssue := issueReq(w.Allow(t, 1).GetSignedReceipt())
	iss0, err := alice.Issue(ctx, sampleIssue)
	if err != nil {
		t.Fatal(err)
	}
	sampleVerify := verifyReq(iss0, proofFor(iss0))
	ver0, err := alice.Verify(ctx, sampleVerify)
	if err != nil || !ver0.GetValid() {
		t.Fatalf("the sample Verify: %v %v %s", err, ver0.GetFailure(), ver0.GetDetail())
	}
	floors.issueResp.Store(iss0)
	floors.verifyResp.Store(ver0)
	floorCall := func(method string, req proto.Message, resp func() proto.Message) func(ctx context.Context) error {
		return func(ctx context.Context) error { return aliceConn.Invoke(ctx, method, req, resp()) }
	}
	floorIssue := func(method string) func(ctx context.Context, req *leasev1.IssueRequest) (*leasev1.IssueResponse, error) {
		return func(ctx context.Context, req *leasev1.IssueRequest) (*leasev1.IssueResponse, error) {
			resp := new(leasev1.IssueResponse)
			return resp, aliceConn.Invoke(ctx, method, req, resp)
		}
	}
	issueFloorCall, issueReceiptFloorCall := floorIssue(issueFloorMethod), floorIssue(issueReceiptFloorMethod)
	newIssueResponse := func() proto.Message { return new(leasev1.IssueResponse) }
	issueFloor := floorCall(issueFloorMethod, sampleIssue, newIssueResponse)
	issueReceiptFloor := floorCall(issueReceiptFloorMethod, sampleIssue, newIssueResponse)
	verifyFloor := floorCall(verifyFloorMethod, sampleVerify, func() proto.Message { return new(leasev1.VerifyResponse) })
	redeemFloor := func(ctx context.Context) error {
		return executorConn.Invoke(ctx, redeemFloorMethod, iss0.GetClaims(), new(leasev1.VerifyResponse))
	}
	for _, f := range []func(context.Context) error{issueFloor, issueReceiptFloor, verifyFloor, redeemFloor} {
		if err := f(ctx); err != nil {
			t.Fatalf("a floor: %v", err)
		}
	}
	repeat := func(call func(ctx context.Context) error) func(ctx context.Context, stop func() bool, done func()) error {
		return func(ctx context.Context, stop func() bool, done func()) error {
			for !stop() {
				if err := call(ctx); err != nil {
					return err
				}
				done()
			}
			return nil
		}
	}

	// A receipt is redeemed for one lease, so every Issue cites a fresh
	// one; the Checks that make them are admission's work, not Issue's, so
	// they run before the clock, leaseReceipts for each round (a worker
	// that finds none left stops, and the arm's time ends with the last).
	var issueArm, verifyArm, redeemArm, healthArm, issueFloorArm, issueReceiptFloorArm, verifyFloorArm, redeemFloorArm arm
	var lat []time.Duration
	issuedAll, redeemedAll := 0, 0
	// Where Issue's CPU goes beside its floor's: this process (every
	// service, the client) and the lease database's Postgres backends.
	pg := newPGMeter(ctx, t, w.LeaseDB)
	issueCPU, issueFloorCPU, issueReceiptFloorCPU := &cpuSplit{pg: pg}, &cpuSplit{pg: pg}, &cpuSplit{pg: pg}
	for round := range leaseRounds {
		receipts := freshReceipts(t, w, leaseReceipts)
		receiptsStored(t, w.AdmissionDB)
		var next atomic.Int64
		var mu sync.Mutex
		// issueSlice is the client of an Issue slice, the same for Issue
		// and its floors, so that the client's share of this process's CPU
		// is alike in the three: each call cites the next receipt in a
		// request of its own and the responses are kept (Issue's are
		// verified and redeemed after; a floor's are dropped after its
		// slice). Issue uses each receipt once and stops when none is
		// left; a floor, which claims none, starts over.
		issueSlice := func(call func(context.Context, *leasev1.IssueRequest) (*leasev1.IssueResponse, error), once bool, kept *[]*leasev1.IssueResponse) func(ctx context.Context, stop func() bool, done func()) error {
			var next atomic.Int64 // the slice's own: the three are made before any runs
			return func(ctx context.Context, stop func() bool, done func()) error {
				var mine []*leasev1.IssueResponse
				for !stop() {
					i := next.Add(1) - 1
					if i >= int64(len(receipts)) {
						if once {
							break
						}
						i %= int64(len(receipts))
					}
					resp, err := call(ctx, issueReq(receipts[i]))
					if err != nil {
						return err
					}
					mine = append(mine, resp)
					done()
				}
				mu.Lock()
				*kept = append(*kept, mine...)
				mu.Unlock()
				return nil
			}
		}
		var issued []*leasev1.IssueResponse
		// timed runs one Issue slice (profiled, its CPU split kept).
		timed := func(name string, cpu *cpuSplit, a *arm, slice func(ctx context.Context, stop func() bool, done func()) error) func() {
			return func() {
				stop := profile(t, fmt.Sprintf("%s-%d", name, round))
				cpu.start(ctx, t)
				a.add(phaseFor(t, leaseSlice, slice))
				cpu.stop(ctx, t)
				stop()
			}
		}
		var dropped []*leasev1.IssueResponse
		issueSlices := map[byte]func(){
			'I': timed("lease-issue", issueCPU, &issueArm, issueSlice(func(ctx context.Context, req *leasev1.IssueRequest) (*leasev1.IssueResponse, error) {
				return alice.Issue(ctx, req)
			}, true, &issued)),
			'F': timed("lease-issue-floor", issueFloorCPU, &issueFloorArm, issueSlice(issueFloorCall, false, &dropped)),
			'R': timed("lease-issue-receipt-floor", issueReceiptFloorCPU, &issueReceiptFloorArm, issueSlice(issueReceiptFloorCall, false, &dropped)),
		}
		for _, arm := range []byte(issueOrders[round%len(issueOrders)]) {
			issueSlices[arm]()
			dropped = nil
		}
		issuedAll += len(issued)

		// Each lease is used once: by Verify, or (every other one) by
		// Redeem.
		var toVerify, toRedeem []*leasev1.IssueResponse
		for i, iss := range issued {
			if i%2 == 1 {
				toRedeem = append(toRedeem, iss)
			} else {
				toVerify = append(toVerify, iss)
			}
		}
		// The holder proofs are the holder's work (an Ed25519 signature
		// each), which the health arm has no counterpart of: they are made
		// before the clock, right before the Verify slice (well inside the
		// proof window), which times the lease service's work only.
		verifies := make([]*leasev1.VerifyRequest, len(toVerify))
		for i, iss := range toVerify {
			verifies[i] = verifyReq(iss, proofFor(iss))
		}
		next.Store(0)
		stopProfile := profile(t, fmt.Sprintf("lease-verify-%d", round))
		verifyArm.add(phaseFor(t, leaseSlice, func(ctx context.Context, stop func() bool, done func()) error {
			var mine []time.Duration
			for !stop() {
				i := next.Add(1) - 1
				if i >= int64(len(verifies)) {
					break
				}
				start := time.Now()
				resp, err := alice.Verify(ctx, verifies[i])
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
		verifyFloorArm.add(phaseFor(t, leaseSlice, repeat(verifyFloor)))

		{
			next.Store(0)
			redeemArm.add(phaseFor(t, leaseSlice, func(ctx context.Context, stop func() bool, done func()) error {
				for !stop() {
					i := next.Add(1) - 1
					if i >= int64(len(toRedeem)) {
						break
					}
					if err := redeem(ctx, executor, toRedeem[i].GetClaims()); err != nil {
						return err
					}
					done()
				}
				return nil
			}))
			redeemedAll += len(toRedeem)
		}
		redeemFloorArm.add(phaseFor(t, leaseSlice, repeat(redeemFloor)))

		stopProfile = profile(t, fmt.Sprintf("lease-health-%d", round))
		healthArm.add(phaseFor(t, leaseSlice, repeat(func(ctx context.Context) error {
			_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		})))
		stopProfile()
	}
	if len(lat) == 0 {
		t.Fatal("no lease verified")
	}
	slices.Sort(lat)
	p99 := lat[(len(lat)*99)/100]
	redeemQPS := fmt.Sprintf("%.0f", redeemArm.qps())
	redeemRatio := fmt.Sprintf("%.2f", redeemArm.qps()/redeemFloorArm.qps())
	// Issue's target is against its receipt floor, the least the rules
	// allow (the execution receipt recorded: DESIGN §7), as Check's is
	// against its validated floor; the 3-column floor records no claim and
	// is below what the rules allow, printed beside it.
	fmt.Printf("lease: issue_qps=%.0f redeem_qps=%s verify_qps=%.0f health_qps=%.0f issue_to_floor=%.2f redeem_to_floor=%s verify_to_floor=%.2f verify_p99_ms=%.2f issue_to_receipt_floor=%.2f receipt_floor_to_floor=%.2f\n",
		issueArm.qps(), redeemQPS, verifyArm.qps(), healthArm.qps(), issueArm.qps()/issueFloorArm.qps(), redeemRatio,
		verifyArm.qps()/verifyFloorArm.qps(), float64(p99.Microseconds())/1000,
		issueArm.qps()/issueReceiptFloorArm.qps(), issueReceiptFloorArm.qps()/issueFloorArm.qps())
	fmt.Printf("  (floors on the same lease server, same interceptors, same request and response sizes: issue_floor_qps=%.0f (RPC + EdDSA verify + sign + group commit of a 3-column row into a table with a unique receipt id, which is the receipt's single use: no claim recorded, below what the rules allow) issue_receipt_floor_qps=%.0f (the same, the row the execution receipt the rules require: the lease's claims in 16 columns, unique admission receipt; no freeze read) redeem_floor_qps=%.0f (RPC + SET NX) verify_floor_qps=%.0f (RPC + 2 EdDSA verify + SET NX); health/floor: issue %.2f redeem %.2f verify %.2f)\n",
		issueFloorArm.qps(), issueReceiptFloorArm.qps(), redeemFloorArm.qps(), verifyFloorArm.qps(),
		issueFloorArm.qps()/healthArm.qps(), redeemFloorArm.qps()/healthArm.qps(), verifyFloorArm.qps()/healthArm.qps())
	issueProc, issuePG := issueCPU.perCall(issueArm.calls)
	floorProc, floorPG := issueFloorCPU.perCall(issueFloorArm.calls)
	recProc, recPG := issueReceiptFloorCPU.perCall(issueReceiptFloorArm.calls)
	fmt.Printf("  (CPU per call, µs: issue process=%.0f postgres=%.0f, issue floor process=%.0f postgres=%.0f, issue receipt floor process=%.0f postgres=%.0f; process = this test process: every service and the clients; postgres = the lease database's backends)\n",
		issueProc, issuePG, floorProc, floorPG, recProc, recPG)
	redeemNote := fmt.Sprintf("%d redeemed", redeemedAll)
	fmt.Printf("  (%d workers, %d rounds of %s per arm; %d leases issued, %d verified; %s; target issue_to_receipt_floor, redeem_to_floor, verify_to_floor >= 0.8; %s)\n",
		leaseWorkers, leaseRounds, leaseSlice, issuedAll, len(lat), redeemNote, time.Now().UTC().Format(time.RFC3339))
}

// leaseReceipts is the ALLOW receipts made before each Issue slice: more
// than the lease service issues in leaseSlice on this machine.
const leaseReceipts = 8192

// receiptMaking bounds the time spent making one round's receipts (see
// [freshReceipts]).
const receiptMaking = 2 * time.Second

// freshReceipts makes n ALLOW receipts of alice's for shipment_status at
// generation 1, leaseWorkers Checks at a time.
// receiptsStored waits until admission's receipts writer has stored the
// receipts of the Checks just made (the count of its table holds still for
// 100 ms), so that the writer's COPY into the shared Postgres does not run
// inside the Issue arm that follows, which its floor arm never shares.
func receiptsStored(t *testing.T, admissionDB string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admissionDB)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	last := int64(-1)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM admission.receipts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == last {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("admission's receipts were still being stored after 30 s (%d)", n)
		}
		last = n
	}
}

func freshReceipts(t *testing.T, w *leaseworld.World, n int) []string {
	t.Helper()
	// A signed receipt is good until its decision's valid_until (the
	// replica's freshness window, 5 s): making them stops after
	// receiptMaking, and the Issue arm takes the newest first, so none is
	// stale when it is cited however slow the machine is.
	var (
		mu  sync.Mutex
		out = make([]string, 0, n)
	)
	deadline := time.Now().Add(receiptMaking)
	var wg sync.WaitGroup
	for range leaseWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				r := w.Check(t, "alice", 1, leaseworld.ShipmentArgs)
				if r.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
					t.Errorf("Check for a receipt: %v %s", r.GetReason(), r.GetDetail())
					return
				}
				mu.Lock()
				full := len(out) == n
				if !full {
					out = append(out, r.GetSignedReceipt())
				}
				mu.Unlock()
				if full {
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	slices.Reverse(out)
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
	// Every arm starts with no garbage left by the phase before it (the
	// Checks that made the receipts, the previous arm's responses).
	runtime.GC()
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

// cpuSplit sums the CPU of this process and of one database's Postgres
// backends over the phases between start and stop.
type cpuSplit struct {
	pg        *pgMeter
	proc0     float64
	pg0       map[int]float64
	proc, pgs float64 // seconds
}

func (c *cpuSplit) start(ctx context.Context, t *testing.T) {
	c.pg0, c.proc0 = c.pg.sample(ctx, t), cpuSeconds()
}

func (c *cpuSplit) stop(ctx context.Context, t *testing.T) {
	c.proc += cpuSeconds() - c.proc0
	for pid, cpu := range c.pg.sample(ctx, t) {
		c.pgs += cpu - c.pg0[pid] // a backend started meanwhile: all of it
	}
}

// perCall is the CPU per call in µs: this process's and Postgres's.
func (c *cpuSplit) perCall(calls int64) (proc, pg float64) {
	if calls == 0 {
		return 0, 0
	}
	return c.proc * 1e6 / float64(calls), c.pgs * 1e6 / float64(calls)
}
