package ledger

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/platform/redistest"
)

// ledgers returns the real ledger and the fake, each with a second client
// on the same store (another replica).
func ledgers(t *testing.T) map[string][2]Ledger {
	prefix := redistest.NewPrefix(t)
	a := redisclient.Open(redistest.Addr(), prefix)
	b := redisclient.Open(redistest.Addr(), prefix)
	t.Cleanup(func() { a.Close(); b.Close() })
	if err := a.Check(context.Background()); err != nil {
		t.Fatalf("redis: %v", err)
	}
	m := &Memory{}
	return map[string][2]Ledger{"Redis": {NewRedis(a), NewRedis(b)}, "Memory": {m, m}}
}

func TestConsumeIsSingleUseAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	for name, l := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			if err := l[0].Consume(ctx, "lease-a", time.Minute); err != nil {
				t.Fatalf("first consume: %v", err)
			}
			if err := l[0].Consume(ctx, "lease-a", time.Minute); !errors.Is(err, ErrAlreadyUsed) {
				t.Fatalf("second consume on the same replica = %v, want ErrAlreadyUsed", err)
			}
			if err := l[1].Consume(ctx, "lease-a", time.Minute); !errors.Is(err, ErrAlreadyUsed) {
				t.Fatalf("second consume on another replica = %v, want ErrAlreadyUsed", err)
			}
			if err := l[1].Consume(ctx, "lease-b", time.Minute); err != nil {
				t.Fatalf("another lease: %v", err)
			}
		})
	}
}

func TestConcurrentConsumeFromTwoClientsExactlyOneWins(t *testing.T) {
	ctx := context.Background()
	for name, l := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			const leases, tries = 50, 8
			for i := range leases {
				id := fmt.Sprintf("lease-%d", i)
				var wins, used atomic.Int32
				var wg sync.WaitGroup
				start := make(chan struct{})
				for j := range tries {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						switch err := l[j%2].Consume(ctx, id, time.Minute); {
						case err == nil:
							wins.Add(1)
						case errors.Is(err, ErrAlreadyUsed):
							used.Add(1)
						default:
							t.Errorf("consume: %v", err)
						}
					}()
				}
				close(start)
				wg.Wait()
				if wins.Load() != 1 || used.Load() != tries-1 {
					t.Fatalf("%s: %d won, %d refused; want exactly 1 and %d", id, wins.Load(), used.Load(), tries-1)
				}
			}
		})
	}
}

func TestRedisRemembersForTheLeasesRemainingLifetime(t *testing.T) {
	ctx := context.Background()
	c := redistest.NewClient(t)
	l := NewRedis(c)
	if err := l.Consume(ctx, "lease-ttl", 7*time.Second); err != nil {
		t.Fatal(err)
	}
	ttl, err := c.PTTL(ctx, c.Key("lease", "used", "lease-ttl")).Result()
	if err != nil || ttl <= 6*time.Second || ttl > 7*time.Second {
		t.Fatalf("PTTL = %s, %v; want just under 7s", ttl, err)
	}
	if err := l.Consume(ctx, "lease-short", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ttl, _ = c.PTTL(ctx, c.Key("lease", "used", "lease-short")).Result()
	if ttl <= 900*time.Millisecond {
		t.Fatalf("PTTL = %s; want at least MinTTL", ttl)
	}
}

func TestMemoryForgetsAfterTTL(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	m := &Memory{Now: func() time.Time { return now }}
	ctx := context.Background()
	_ = m.Consume(ctx, "x", 5*time.Second)
	now = now.Add(4 * time.Second)
	if err := m.Consume(ctx, "x", 5*time.Second); !errors.Is(err, ErrAlreadyUsed) {
		t.Fatalf("within ttl: %v", err)
	}
	now = now.Add(2 * time.Second)
	if err := m.Consume(ctx, "x", 5*time.Second); err != nil {
		t.Fatalf("after ttl: %v", err)
	}
}

// TestRedisDownFailsClosed: with Redis unreachable, Consume is neither a
// success nor ALREADY_USED but ErrUnavailable, which Verify turns into a
// refusal.
func TestRedisDownFailsClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	c := redisclient.Open(addr, "toolcrib-test:down:")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = NewRedis(c).Consume(ctx, "lease-x", time.Minute)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrAlreadyUsed) {
		t.Fatalf("Consume with Redis down = %v, want ErrUnavailable", err)
	}
	m := &Memory{}
	m.SetDown(true)
	if err := m.Consume(ctx, "lease-x", time.Minute); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Memory down = %v", err)
	}
}

// TestUseIDBindsTheAudience: one lease's use id is the same whenever it is
// asked for, differs for another audience or another lease, and stays
// short whatever the audience's length.
func TestUseIDBindsTheAudience(t *testing.T) {
	a := UseID("lease-1", "executor.inventory")
	if a != UseID("lease-1", "executor.inventory") {
		t.Fatal("the use id of one lease and audience changed")
	}
	for _, other := range []string{UseID("lease-1", "executor.billing"), UseID("lease-2", "executor.inventory"), UseID("lease-1", "")} {
		if other == a {
			t.Fatalf("%q is also the use id of another lease or audience", other)
		}
	}
	if got := UseID("lease-1", strings.Repeat("a", 1<<20)); len(got) != len("lease-1:")+22 {
		t.Fatalf("a megabyte audience gives a %d-byte use id", len(got))
	}
}
