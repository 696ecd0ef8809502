package admission

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// TestBenchRevocation is `make bench-admission`'s revocation line (set
// TOOLCRIB_BENCH=1): the real registry and discovery, two admission
// replicas started by their own Run, each checked continuously by two
// clients of alice planning at the current epoch. Each sample grants
// alice's scope, waits until both replicas allow, then revokes it and
// measures from the revoke's commit (the change's committed_at in the
// registry's log: its transaction time, so the figure errs long) to the
// last ALLOW any client saw (its receipt's decided_at), 0 when no ALLOW
// was decided after the commit. Every client must see the denial within
// 5 s, and no ALLOW may follow a denial. It reports; it never fails on
// time. TOOLCRIB_BENCH_SAMPLES sets the sample count (default 50).
func TestBenchRevocation(t *testing.T) {
	if os.Getenv("TOOLCRIB_BENCH") == "" {
		t.Skip("set TOOLCRIB_BENCH=1 (make bench-admission)")
	}
	samples := 50
	if n, err := strconv.Atoi(os.Getenv("TOOLCRIB_BENCH_SAMPLES")); err == nil && n > 0 {
		samples = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w := newWorld(t)
	reps := []*replica{w.startReplica(t, 5*time.Second), w.startReplica(t, 5*time.Second)}
	var clients []admissionv1.AdmissionServiceClient
	for _, r := range reps {
		for range 2 {
			clients = append(clients, w.client(t, r, "alice", tenantA))
		}
	}
	commits := w.policyCommits(t, ctx)

	var lags []time.Duration
	for i := range samples {
		epoch := w.epoch(t)
		if i > 0 { // the first sample starts from the world's grant
			g, err := w.st.Registry.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantA, Subject: "alice", Scopes: []string{scope}})
			if err != nil {
				t.Fatal(err)
			}
			epoch = g.GetPolicyEpoch()
		}
		for _, c := range clients {
			eventually(t, ctx, c, w.req(epoch), allow)
		}
		lag := w.revokeWhileChecking(t, ctx, clients, epoch, commits)
		lags = append(lags, max(lag, 0))
	}
	slices.Sort(lags)
	q := func(p int) time.Duration { return lags[(len(lags)*p+99)/100-1] }
	fmt.Printf("revocation: samples=%d p50_ms=%.3f p99_ms=%.3f max_ms=%.3f\n", len(lags), ms(q(50)), ms(q(99)), ms(lags[len(lags)-1]))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// req is alice's plan for the tool at the world's generation and digest,
// planned at epoch.
func (w *world) req(epoch int64) *admissionv1.CheckRequest {
	return &admissionv1.CheckRequest{ToolId: toolID, Generation: w.generation, DescriptorDigest: w.digest,
		PolicyEpoch: epoch, Arguments: []byte(`{"shipment_id":"s-1"}`), Mode: admissionv1.Mode_MODE_AUTONOMOUS}
}

// revokeWhileChecking runs every client in a loop, revokes alice's scope,
// waits until every client saw a denial, and returns the last ALLOW's
// decision time minus the revoke's commit time.
func (w *world) revokeWhileChecking(t *testing.T, ctx context.Context, clients []admissionv1.AdmissionServiceClient,
	epoch int64, commits *commitLog) time.Duration {
	t.Helper()
	type tally struct {
		lastAllow       time.Time
		denied, flipped bool
		err             error
	}
	tallies := make([]tally, len(clients))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var denials sync.WaitGroup
	denials.Add(len(clients))
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tl := &tallies[i]
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.Check(ctx, w.req(epoch))
				if err != nil {
					tl.err = err
					if !tl.denied {
						denials.Done()
					}
					return
				}
				if resp.GetReason() == allow {
					tl.lastAllow = resp.GetReceipt().GetDecidedAt().AsTime()
					tl.flipped = tl.flipped || tl.denied
				} else if !tl.denied {
					tl.denied = true
					denials.Done()
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond) // every client is allowed, continuously
	rv, err := w.st.Registry.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenantA, Subject: "alice", Scopes: []string{scope}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { denials.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		close(stop)
		wg.Wait()
		t.Fatalf("a client still saw no denial 5 s after the revoke to epoch %d", rv.GetPolicyEpoch())
	}
	close(stop)
	wg.Wait()
	committed := commits.at(t, rv.GetPolicyEpoch())
	var last time.Time
	for i, tl := range tallies {
		if tl.err != nil {
			t.Fatalf("client %d: %v", i, tl.err)
		}
		if tl.flipped {
			t.Fatalf("client %d: an ALLOW after a denial", i)
		}
		if tl.lastAllow.After(last) {
			last = tl.lastAllow
		}
	}
	return last.Sub(committed)
}

// commitLog is tenant-a's policy changes' commit times by epoch, read from
// the registry's Watch.
type commitLog struct {
	mu      sync.Mutex
	byEpoch map[int64]time.Time
	cond    *sync.Cond
	err     error
}

func (w *world) policyCommits(t *testing.T, ctx context.Context) *commitLog {
	t.Helper()
	st, err := w.st.Registry.Watch(ctx, &registryv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	l := &commitLog{byEpoch: map[int64]time.Time{}}
	l.cond = sync.NewCond(&l.mu)
	go func() {
		for {
			msg, err := st.Recv()
			l.mu.Lock()
			if err != nil {
				l.err = err
				l.cond.Broadcast()
				l.mu.Unlock()
				return
			}
			if p := msg.GetChange().GetPolicy(); p.GetTenantId() == tenantA {
				l.byEpoch[p.GetPolicyEpoch()] = msg.GetChange().GetCommittedAt().AsTime()
				l.cond.Broadcast()
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// at waits for epoch's commit time.
func (l *commitLog) at(t *testing.T, epoch int64) time.Time {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if at, ok := l.byEpoch[epoch]; ok {
			return at
		}
		if l.err != nil {
			t.Fatalf("the registry's Watch ended before epoch %d: %v", epoch, l.err)
		}
		l.cond.Wait()
	}
}
