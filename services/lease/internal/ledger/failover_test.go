package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/platform/redistest"
)

// TestSingleUseSurvivesSentinelFailover: the ledger on a redis-sentinel URL
// consumes leases under load while the primary first loses its replica
// links for good (so what it records from then on is on the primary only)
// and is then killed. The same client recovers against the promoted replica without a
// restart, and every lease that was accepted (Consume returned nil) before,
// during or after the failover is ALREADY_USED when presented again: no
// acceptance rested on a write the failover lost.
func TestSingleUseSurvivesSentinelFailover(t *testing.T) {
	d := redistest.StartSentinel(t)
	c, err := redisclient.New(redisclient.Config{URL: d.URL()}, redistest.NewPrefix(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := NewRedis(c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var (
		mu                          sync.Mutex
		accepted                    []string
		unavailable, refused, total atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("lease-%d-%d", w, i)
				cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
				err := l.Consume(cctx, id, time.Hour)
				ccancel()
				total.Add(1)
				switch {
				case err == nil:
					mu.Lock()
					accepted = append(accepted, id)
					mu.Unlock()
				case errors.Is(err, ErrUnavailable):
					unavailable.Add(1)
					time.Sleep(10 * time.Millisecond)
				case errors.Is(err, ErrAlreadyUsed):
					// go-redis retried a SET NX whose reply the kill cut
					// off: the lease is burned, never accepted.
					refused.Add(1)
				default:
					t.Errorf("fresh lease %s: %v", id, err)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	primary := redisclient.Open(d.Primary.Addr(), "")
	// The replicas lose their link and may not resync: from now on the
	// primary alone holds what it records.
	if err := primary.Do(ctx, "ACL", "SETUSER", "default", "-psync", "-sync").Err(); err != nil {
		t.Fatal(err)
	}
	if err := primary.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	// Leases recorded on the primary alone, for longer than a WAIT lasts.
	time.Sleep(3 * redisclient.AckTimeout)
	primary.Close()
	d.Primary.Kill()

	for {
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		err := l.Consume(cctx, fmt.Sprintf("probe-%d", time.Now().UnixNano()), time.Hour)
		ccancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the ledger never recovered: %v\n%s", err, d.Sentinel.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if role := c.Do(ctx, "ROLE").String(); role == "" || c.Options().Addr == d.Primary.Addr() {
		t.Fatalf("still on the killed primary: %s", role)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d consumes, %d accepted, %d unavailable, %d fresh ones refused as used", total.Load(), len(accepted), unavailable.Load(), refused.Load())
	var twice []string
	for _, id := range accepted {
		if err := l.Consume(ctx, id, time.Hour); !errors.Is(err, ErrAlreadyUsed) {
			twice = append(twice, fmt.Sprintf("%s: %v", id, err))
		}
	}
	if len(twice) > 0 {
		t.Fatalf("%d of %d accepted leases were accepted again after the failover, e.g. %v", len(twice), len(accepted), twice[:min(3, len(twice))])
	}
	if unavailable.Load() == 0 {
		t.Fatal("no consume was refused as unavailable: the failover did not happen mid-load")
	}
}
