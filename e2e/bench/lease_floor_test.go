package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/redistest"
)

// floorRounds and floorSlice: the floor's steps take turns, floorSlice
// each, floorRounds times (as the arms of the benchmark do).
const (
	floorRounds = 3
	floorSlice  = 300 * time.Millisecond
)

// leaseFloor is what the issue's own rules cost on this machine, each step
// alone at leaseWorkers concurrent callers, as calls per second:
//
//   - health: a Health/Check roundtrip to the lease service (the baseline,
//     and the least any RPC costs: Issue and Verify are RPCs too);
//   - verify, sign: one Ed25519 verification, one signature;
//   - setnx: one Redis `SET NX PX` on a fresh key (single use), the
//     commands pending at once in one pipeline as the ledger sends them;
//   - receipt: one admission GetReceipt roundtrip (Issue by receipt_id);
//   - commit: one row durably committed through a group commit like the
//     lease store's (two flushers, each batch one INSERT ... unnest, one
//     transaction, synchronous_commit as the server has it).
//
// Verify needs its own RPC, two verifications (lease and holder proof) and
// a SET NX; Issue its own RPC, a GetReceipt, a SET NX (the receipt's single
// use), a signature and a commit. If
// everything else were free, and the steps that use the cores shared them
// the way they do in the benchmark (their per-call costs add), the best
// ratios are
//
//	verify_ratio_max = (1/health) / (1/health + 2/verify + 1/setnx)
//	issue_ratio_max  = min((1/health) / (1/health + 1/receipt + 1/setnx + 1/sign), commit/health)
//
// The commit is mostly waiting for the WAL flush, which other callers' work
// overlaps, so it is not added: it caps Issue at its own rate with as many
// callers (a bound no faster service can pass).
type leaseFloor struct {
	health, verify, sign, setnx, receipt, commit float64
}

func (f leaseFloor) verifyRatioMax() float64 {
	return (1 / f.health) / (1/f.health + 2/f.verify + 1/f.setnx)
}

func (f leaseFloor) issueRatioMax() float64 {
	return min((1/f.health)/(1/f.health+1/f.receipt+1/f.setnx+1/f.sign), f.commit/f.health)
}

// us is the per-call cost of a step at qps calls per second, in µs.
func us(qps float64) float64 { return 1e6 / qps }

func (f leaseFloor) String() string {
	return fmt.Sprintf("lease: floor verify_ratio_max=%.2f issue_ratio_max=%.2f health_qps=%.0f ed25519_verify_qps=%.0f ed25519_sign_qps=%.0f redis_setnx_qps=%.0f get_receipt_qps=%.0f pg_group_commit_qps=%.0f\n"+
		"  (per call at %d callers: health %.1f µs; verify needs health + 2 x %.1f + %.1f µs; issue needs health + %.1f + %.1f + %.1f µs and at most %.0f commits/s)",
		f.verifyRatioMax(), f.issueRatioMax(), f.health, f.verify, f.sign, f.setnx, f.receipt, f.commit,
		leaseWorkers, us(f.health), us(f.verify), us(f.setnx), us(f.receipt), us(f.setnx), us(f.sign), f.commit)
}

// measureLeaseFloor runs the steps of [leaseFloor] in turns.
func measureLeaseFloor(t *testing.T, hc healthpb.HealthClient, adm admissionv1.AdmissionServiceClient, receipt string) leaseFloor {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// A signing input the size of a lease's.
	msg := make([]byte, 700)
	sig := ed25519.Sign(priv, msg)
	rc := redistest.NewClient(t)
	var n atomic.Int64
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE floor_receipts (receipt_id uuid PRIMARY KEY, lease_id text NOT NULL,
  issued_at timestamptz NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	// The commands pending at once share one pipeline, as the ledger's do.
	setnx := &floorGroup{max: 128, run: func(ctx context.Context, k int) error {
		cmds := make([]*redis.BoolCmd, k)
		_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range cmds {
				cmds[i] = p.SetNX(ctx, rc.Key("floor", strconv.FormatInt(n.Add(1), 10)), 1, time.Minute)
			}
			return nil
		})
		for _, c := range cmds {
			if ok, cerr := c.Result(); err == nil && (cerr != nil || !ok) {
				err = fmt.Errorf("floor: SET NX of a fresh key: %v, %v", ok, cerr)
			}
		}
		return err
	}}
	// The rows pending at once are one statement, one transaction.
	commit := &floorGroup{max: 256, run: func(ctx context.Context, k int) error {
		ids, leases, at := make([]uuid.UUID, k), make([]string, k), make([]time.Time, k)
		now := time.Now()
		for i := range k {
			ids[i], leases[i], at[i] = uuid.New(), uuid.NewString(), now
		}
		_, err := pool.Exec(ctx, `INSERT INTO floor_receipts (receipt_id, lease_id, issued_at)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::timestamptz[])`, ids, leases, at)
		return err
	}}

	var f leaseFloor
	steps := []struct {
		rate *float64
		arm  arm
		step func(ctx context.Context) error
	}{
		{rate: &f.health, step: func(ctx context.Context) error {
			_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		}},
		{rate: &f.verify, step: func(context.Context) error {
			if !ed25519.Verify(pub, msg, sig) {
				return fmt.Errorf("floor: the signature does not verify")
			}
			return nil
		}},
		{rate: &f.sign, step: func(context.Context) error {
			ed25519.Sign(priv, msg)
			return nil
		}},
		{rate: &f.setnx, step: setnx.call},
		{rate: &f.receipt, step: func(ctx context.Context) error {
			_, err := adm.GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: receipt})
			return err
		}},
		{rate: &f.commit, step: commit.call},
	}
	for range floorRounds {
		for i := range steps {
			s := &steps[i]
			s.arm.add(phaseFor(t, floorSlice, func(ctx context.Context, stop func() bool, done func()) error {
				for !stop() {
					if err := s.step(ctx); err != nil {
						return err
					}
					done()
				}
				return nil
			}))
		}
	}
	for _, s := range steps {
		*s.rate = s.arm.qps()
	}
	return f
}

// floorGroup is the least a batch of concurrent calls does: what is
// pending when a flusher (at most two) looks is one run of at most max.
type floorGroup struct {
	max      int
	run      func(ctx context.Context, n int) error
	mu       sync.Mutex
	pending  []chan error
	flushers int
}

func (g *floorGroup) call(ctx context.Context) error {
	done := make(chan error, 1)
	g.mu.Lock()
	g.pending = append(g.pending, done)
	start := g.flushers < 2
	if start {
		g.flushers++
	}
	g.mu.Unlock()
	if start {
		go g.flush()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *floorGroup) flush() {
	for {
		g.mu.Lock()
		batch := g.pending[:min(len(g.pending), g.max)]
		if len(batch) == 0 {
			g.flushers--
			g.mu.Unlock()
			return
		}
		g.pending = g.pending[len(batch):len(g.pending):len(g.pending)]
		g.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := g.run(ctx, len(batch))
		cancel()
		for _, done := range batch {
			done <- err
		}
	}
}
