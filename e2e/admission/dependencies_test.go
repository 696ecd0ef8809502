package admission

import (
	"context"
	neturl "net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/faultreport"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	admissionsvc "github.com/toolcrib/toolcrib/services/admission"
)

func healthOf(t *testing.T, addr string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(servicetest.Dial(t, addr, "")).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return resp.GetStatus()
}

func waitHealth(t *testing.T, addr string, want healthpb.HealthCheckResponse_ServingStatus, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for healthOf(t, addr) != want {
		if time.Since(start) > within {
			t.Fatalf("health not %v within %v", want, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// TestRedisStoppedMidLoadDecidesFromL1AndDirectReads: a replica's Redis
// (its L2) goes away while it answers a steady load (the link severed:
// open connections closed, new ones refused). Health stays SERVING.
// Decisions cached in L1 keep
// answering ALLOW, a decision on a new key (USER_CONFIRMED) is made from
// direct reads, no Check fails; a revocation committed while Redis is
// away is POLICY_REVOKED within the bound (a new epoch is a new key: no
// stale entry can answer). After Redis returns nothing changes that.
func TestRedisStoppedMidLoadDecidesFromL1AndDirectReads(t *testing.T) {
	ctx := ctxFor(t)
	w := newWorld(t)
	link := servicetest.NewProxy(t, redistest.Addr())
	rep := w.startReplicaWith(t, 5*time.Second, w.redisPrefix, func(c *admissionsvc.Config) {
		c.RedisURL = "redis://" + link.Addr()
		c.DependencyCheckInterval = 100 * time.Millisecond
	})
	alice := w.client(t, rep, "alice", tenantA)
	epoch := w.epoch(t)
	w.requireAllow(t, ctx, alice, epoch) // L1 and L2
	if w.l2Keys(t) == 0 {
		t.Fatal("nothing in L2 before Redis went away")
	}
	link.Sever()
	confirmedAlice := w.confirmedClient(t, rep, "alice", tenantA)
	confirmed := func() (*admissionv1.CheckResponse, error) {
		return confirmedAlice.Check(ctx, &admissionv1.CheckRequest{ToolId: toolID, Generation: w.generation, DescriptorDigest: w.digest,
			PolicyEpoch: epoch, Arguments: []byte(`{"shipment_id":"s-1"}`), Mode: admissionv1.Mode_MODE_USER_CONFIRMED})
	}
	checks := 0
	for end := time.Now().Add(time.Second); time.Now().Before(end); checks += 2 {
		w.requireAllow(t, ctx, alice, epoch)
		resp, err := confirmed()
		if err != nil || resp.GetReason() != allow {
			t.Fatalf("a new key with Redis away: %v %v", resp.GetReason(), err)
		}
	}
	// A second of Redis away is ten dependency checks: the replica stays in
	// rotation, since it decides correctly without its L2.
	if st := healthOf(t, rep.addr); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v with only Redis away (it decides from L1 and direct reads)", st)
	}
	t.Logf("Redis away: %d Checks, all ALLOW; health SERVING", checks)

	rv, err := w.st.Registry.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenantA, Subject: "alice", Scopes: []string{scope}})
	if err != nil {
		t.Fatal(err)
	}
	committed := w.committedAt(t, tenantA, rv.GetPolicyEpoch())
	var lastAllow time.Time
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		resp, err := w.check(ctx, alice, epoch, "")
		if err != nil {
			t.Fatalf("Check with Redis away: %v", err)
		}
		switch resp.GetReason() {
		case allow:
			lastAllow = resp.GetReceipt().GetDecidedAt().AsTime()
		case policyRevoked:
		default:
			t.Fatalf("after the revoke with Redis away: %v %q", resp.GetReason(), resp.GetDetail())
		}
	}
	past := 0
	if lastAllow.Sub(committed) > time.Second {
		past = 1
		t.Errorf("last ALLOW %v after the revoke committed, Redis away", lastAllow.Sub(committed))
	}
	faultreport.Add(t, faultreport.AdmissionAllowAfterRevokeBound, int64(past))
	link.Heal()
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		resp, err := w.check(ctx, alice, epoch, "")
		if err != nil || resp.GetReason() != policyRevoked {
			t.Fatalf("Redis back, planned at epoch %d: %v %v", epoch, resp.GetReason(), err)
		}
	}
}

// TestPostgresStoppedMidLoadKeepsAcknowledgedReceipts: a replica's
// Postgres goes away (its link severed) under a steady load of Checks and
// comes back 2 s later. Health turns NOT_SERVING while it is away and
// SERVING again after; Checks are answered (or refused UNAVAILABLE when
// the receipt queue is full: not acknowledged); every receipt of an
// answered Check is stored once Postgres is back — none acknowledged is
// lost.
func TestPostgresStoppedMidLoadKeepsAcknowledgedReceipts(t *testing.T) {
	ctx := ctxFor(t)
	w := newWorld(t)
	u, err := neturl.Parse(w.st.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	link := servicetest.NewProxy(t, u.Host)
	u.Host = link.Addr()
	proxied := u.String()
	rep := w.startReplicaWith(t, 5*time.Second, w.redisPrefix, func(c *admissionsvc.Config) { c.PostgresURL = proxied })
	alice := w.client(t, rep, "alice", tenantA)
	epoch := w.epoch(t)
	w.requireAllow(t, ctx, alice, epoch)

	var (
		mu      sync.Mutex
		ids     []string
		refused int
		reasons = map[string]int{}
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := w.check(ctx, alice, epoch, "")
				mu.Lock()
				if err != nil {
					refused++
				} else {
					ids = append(ids, resp.GetReceipt().GetReceiptId())
					reasons[resp.GetReason().String()]++
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	link.Sever()
	notServing := waitHealth(t, rep.addr, healthpb.HealthCheckResponse_NOT_SERVING, 5*time.Second)
	time.Sleep(2 * time.Second)
	link.Heal()
	serving := waitHealth(t, rep.addr, healthpb.HealthCheckResponse_SERVING, 15*time.Second)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	pool, err := pgxpool.New(ctx, w.st.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var stored int64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM admission.receipts WHERE receipt_id::text = ANY($1)`, ids).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored == int64(len(ids)) || time.Now().After(deadline) {
			break
		}
	}
	faultreport.Add(t, faultreport.AdmissionChecksAnswered, int64(len(ids)))
	faultreport.Add(t, faultreport.AdmissionReceiptsStored, stored)
	t.Logf("Postgres away 2 s: health NOT_SERVING after %v, SERVING %v after the link healed; %d Checks answered %v, %d refused; %d receipts stored",
		notServing.Round(time.Millisecond), serving.Round(time.Millisecond), len(ids), reasons, refused, stored)
	if stored != int64(len(ids)) {
		t.Fatalf("%d of %d acknowledged receipts stored", stored, len(ids))
	}
}
