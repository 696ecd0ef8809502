package suite

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/revision/lease"
)

// lockedBuffer is a log a service writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLeaseSingleUseThroughSentinelFailover: the lease service runs on a
// redis-sentinel URL with an ACL user (one primary, two replicas, one
// sentinel). Leases are verified while the primary is killed: the service,
// never restarted, verifies fresh leases again once a replica is promoted;
// no lease is ever valid twice, before, during or after the failover (a
// Verify the ledger could not answer is LEDGER_UNAVAILABLE, never valid);
// and the service's log shows the URL with the password redacted.
func TestLeaseSingleUseThroughSentinelFailover(t *testing.T) {
	const password = "lease-acl-s3cret"
	d := redistest.StartSentinel(t, "user toolcrib-lease on >"+password+" ~* +@all")
	url := "redis-sentinel://toolcrib-lease:" + password + "@" + d.Sentinel.Addr() + "/" + redistest.MasterName
	var logs lockedBuffer
	w := leaseworld.StartWith(t, leaseworld.Options{CacheTTL: time.Minute, Lease: func(c *config.Common) {
		c.RedisURL, c.LogOutput, c.LogLevel = url, &logs, slog.LevelInfo
	}})
	w.Allow(t, 1)
	// tryIssue takes a lease on a receipt of its own (a receipt gives one
	// lease); the receipt's claim is the lease's record in Postgres, so
	// Issue needs no Redis and keeps issuing through the failover.
	tryIssue := func() (*leasev1.IssueResponse, error) {
		t.Helper()
		chk := w.Check(t, "alice", 1, leaseworld.ShipmentArgs)
		if chk.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
			t.Fatalf("Check: %v %s", chk.GetReason(), chk.GetDetail())
		}
		iss, err := w.Issue(t, "alice", chk.GetReceipt().GetReceiptId())
		if err != nil {
			t.Fatalf("Issue: %v (it needs no Redis)", err)
		}
		return iss, err
	}
	issue := func() *leasev1.IssueResponse {
		t.Helper()
		iss, err := tryIssue()
		if err != nil {
			t.Fatalf("Issue before the failover: %v", err)
		}
		return iss
	}
	valid := map[string]int{} // lease id -> times Verify said valid
	var unavailable int
	verify := func(iss *leasev1.IssueResponse) (ok bool, definitive bool) {
		t.Helper()
		c := iss.GetClaims()
		proof, err := lease.NewProof(w.Holder, lease.Claims{ID: c.GetLeaseId(), ArgumentDigest: c.GetArgumentDigest(), Audience: c.GetAudience()}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		v, err := w.Lease["alice"].Verify(ctx, &leasev1.VerifyRequest{Token: iss.GetToken(), Proof: proof,
			Audience: c.GetAudience(), ArgumentDigest: c.GetArgumentDigest(), ToolId: leaseworld.ToolID})
		if err != nil {
			if code, reason := leaseworld.CodeReason(err); code != codes.Unavailable || reason != "LEDGER_UNAVAILABLE" {
				t.Fatalf("Verify of %s: %v (%v %s), want a verdict or LEDGER_UNAVAILABLE", c.GetLeaseId(), err, code, reason)
			}
			unavailable++
			return false, false
		}
		if v.GetValid() {
			valid[c.GetLeaseId()]++
			return true, true
		}
		if v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_ALREADY_USED {
			t.Fatalf("Verify of %s: %v %s", c.GetLeaseId(), v.GetFailure(), v.GetDetail())
		}
		return false, true
	}

	var leases []*leasev1.IssueResponse
	for range 40 {
		leases = append(leases, issue())
	}
	for _, iss := range leases[:10] {
		if ok, _ := verify(iss); !ok {
			t.Fatalf("Verify before the failover of %s was not valid", iss.GetClaims().GetLeaseId())
		}
	}
	// Kill the primary while the next leases are being verified.
	killed := make(chan struct{})
	go func() {
		time.Sleep(50 * time.Millisecond)
		d.Primary.Kill()
		close(killed)
	}()
	var slowest time.Duration
	for _, iss := range leases[10:] {
		began := time.Now()
		verify(iss)
		slowest = max(slowest, time.Since(began))
		time.Sleep(20 * time.Millisecond)
	}
	<-killed
	// A Verify in flight when the primary died waited for the promotion
	// (down-after is 500 ms) or was refused LEDGER_UNAVAILABLE.
	if slowest < 500*time.Millisecond && unavailable == 0 {
		t.Fatalf("no Verify spanned the failover (slowest %v): the primary was not killed mid-load", slowest)
	}

	// The same service process verifies a fresh lease once a replica is
	// promoted.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fresh, err := tryIssue(); err == nil {
			leases = append(leases, fresh)
			if ok, _ := verify(fresh); ok {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease service never verified a lease after the failover:\n%s", d.Sentinel.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Every lease presented again is ALREADY_USED, whatever it got before.
	for _, iss := range leases {
		if ok, definitive := verify(iss); ok || !definitive {
			t.Fatalf("lease %s presented again after the failover: valid=%v, answered=%v", iss.GetClaims().GetLeaseId(), ok, definitive)
		}
	}
	for id, n := range valid {
		if n > 1 {
			t.Errorf("lease %s was valid %d times", id, n)
		}
	}
	t.Logf("%d leases, %d valid once, %d LEDGER_UNAVAILABLE answers, the slowest Verify across the kill took %v", len(leases), len(valid), unavailable, slowest)

	log := logs.String()
	if strings.Contains(log, password) {
		t.Fatalf("the lease service logged the Redis password:\n%s", log)
	}
	if want := "redis-sentinel://toolcrib-lease:xxxxx@" + d.Sentinel.Addr(); !strings.Contains(log, want) {
		t.Fatalf("the log does not show the redacted URL %s:\n%s", want, log)
	}
}
