package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolcrib/toolcrib/platform/redisclient"
)

// Errors of [Ledger.Consume].
var (
	// ErrAlreadyUsed: the lease was consumed before.
	ErrAlreadyUsed = errors.New("ledger: lease already used")
	// ErrUnavailable: the ledger could not be asked; the caller must refuse
	// the lease (fail closed), never run the call.
	ErrUnavailable = errors.New("ledger: unavailable")
)

// MinTTL is the shortest time a consumed id is remembered, so an id
// consumed at the edge of its lease's life is not forgotten at once.
const MinTTL = time.Second

// Ledger consumes lease ids.
//
// Consume marks leaseID used for ttl (at least [MinTTL]) and returns nil
// the first time; [ErrAlreadyUsed] every later time while remembered,
// whichever replica or client asks, and of concurrent calls exactly one
// gets nil; an error wrapping [ErrUnavailable] when the answer is unknown.
// ttl is the lease's remaining lifetime including the skew allowance, so
// the id is remembered as long as the lease could be accepted.
type Ledger interface {
	Consume(ctx context.Context, leaseID string, ttl time.Duration) error
}

// Redis is the [Ledger] on Redis: `SET <prefix>lease:used:<id> 1 NX PX ttl`.
type Redis struct {
	c *redisclient.Client
}

// NewRedis returns the ledger on c.
func NewRedis(c *redisclient.Client) *Redis { return &Redis{c: c} }

// Consume implements [Ledger].
func (r *Redis) Consume(ctx context.Context, leaseID string, ttl time.Duration) error {
	ok, err := r.c.SetNX(ctx, r.c.Key("lease", "used", leaseID), 1, max(ttl, MinTTL)).Result()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if !ok {
		return ErrAlreadyUsed
	}
	return nil
}

// Memory is a [Ledger] in one process, for tests; it passes the same
// contract tests as [Redis]. Down makes it answer [ErrUnavailable].
type Memory struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu   sync.Mutex
	used map[string]time.Time
	down bool
}

// SetDown makes Consume fail with ErrUnavailable (or work again).
func (m *Memory) SetDown(down bool) { m.mu.Lock(); m.down = down; m.mu.Unlock() }

// Consume implements [Ledger].
func (m *Memory) Consume(_ context.Context, leaseID string, ttl time.Duration) error {
	now := time.Now()
	if m.Now != nil {
		now = m.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return fmt.Errorf("%w: the memory ledger is down", ErrUnavailable)
	}
	if m.used == nil {
		m.used = map[string]time.Time{}
	}
	if until, ok := m.used[leaseID]; ok && now.Before(until) {
		return ErrAlreadyUsed
	}
	m.used[leaseID] = now.Add(max(ttl, MinTTL))
	return nil
}
