package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcrib/toolcrib/platform/redisclient"
)

// Errors of [Ledger.Consume].
var (
	// ErrAlreadyUsed: the lease was consumed before.
	ErrAlreadyUsed = errors.New("ledger: already used")
	// ErrUnavailable: the ledger could not be asked; the caller must refuse
	// the lease (fail closed), never run the call.
	ErrUnavailable = errors.New("ledger: unavailable")
)

// MinTTL is the shortest time a consumed id is remembered, so an id
// consumed at the edge of its lease's life is not forgotten at once.
const MinTTL = time.Second

// Ledger consumes lease ids, each at most once. (An admission receipt's
// single use is not here: the execution receipt's commit claims it, see
// package store.)
//
// Consume marks id (a lease's [UseID]) used for ttl (at least [MinTTL]) and returns nil
// the first time; [ErrAlreadyUsed] every later time while remembered,
// whichever replica or client asks, and of concurrent calls exactly one
// gets nil; an error wrapping [ErrUnavailable] when the answer is unknown.
// ttl is the lease's remaining lifetime including the skew allowance, so
// the id is remembered as long as the lease could be accepted.
type Ledger interface {
	Consume(ctx context.Context, id string, ttl time.Duration) error
}

// UseID is the id under which a lease is consumed: its lease id and its
// audience (the executor it is addressed to), as `<lease id>:<digest of the
// audience>`. A lease has one audience, so Verify (which read both from the
// signed token) and Redeem (which takes the claims as the executor verified
// them) consume the same id for the same lease; a service that presents a
// lease's id under an audience it is paired with but the lease does not
// name consumes another id, and cannot use up the lease of the executor it
// is addressed to. The digest (22 characters of SHA-256) keeps the key
// short whatever the audience's length.
func UseID(leaseID, audience string) string {
	sum := sha256.Sum256([]byte(audience))
	return leaseID + ":" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// Redis is the [Ledger] on Redis: `SET <prefix>lease:used:<id> 1 NX PX ttl`
// for a lease and, with replicas ([redisclient.Client.AckReplicas], Sentinel), a WAIT
// for them at the end of the pipeline: a first use counts only once a
// replica holds it, so a failover that promotes the replica cannot forget
// it; an unacknowledged one is [ErrUnavailable] (the lease is burned, not
// accepted).
// Concurrent calls share a pipeline: the commands pending when a flusher
// (at most [maxFlushers]) looks are written at once and their replies read
// at once, one roundtrip and two syscalls for the lot instead of per call.
// Each command is still its own atomic SET NX, answered to its own caller.
type Redis struct {
	c *redisclient.Client

	mu       sync.Mutex
	pending  []*consume
	flushers int
}

const (
	// maxBatch bounds the commands of one pipeline.
	maxBatch = 128
	// maxFlushers bounds the pipelines in flight (each holds a connection).
	maxFlushers = 2
	// flushTimeout bounds one pipeline: it runs on behalf of many callers,
	// so no single caller's context may cancel it.
	flushTimeout = 5 * time.Second
)

// consume is one Consume waiting for its pipeline.
type consume struct {
	key  string
	ttl  time.Duration
	done chan error // buffered, one value
}

// NewRedis returns the ledger on c.
func NewRedis(c *redisclient.Client) *Redis { return &Redis{c: c} }

// Consume implements [Ledger]. When ctx ends before the answer, the result
// is ErrUnavailable (the SET NX may still run, so the lease may be burned
// without having been accepted: it is never accepted without one).
func (r *Redis) Consume(ctx context.Context, id string, ttl time.Duration) error {
	return r.setNX(ctx, r.c.Key("lease", "used", id), ttl)
}

// setNX queues one SET NX for the next pipeline and waits for its answer.
func (r *Redis) setNX(ctx context.Context, key string, ttl time.Duration) error {
	p := &consume{key: key, ttl: max(ttl, MinTTL), done: make(chan error, 1)}
	r.mu.Lock()
	r.pending = append(r.pending, p)
	start := r.flushers < maxFlushers
	if start {
		r.flushers++
	}
	r.mu.Unlock()
	if start {
		go r.flush()
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
	}
}

// flush runs pipelines until nothing is pending.
func (r *Redis) flush() {
	for {
		r.mu.Lock()
		n := min(len(r.pending), maxBatch)
		if n == 0 {
			r.flushers--
			r.mu.Unlock()
			return
		}
		batch := make([]*consume, n)
		copy(batch, r.pending)
		r.pending = append(r.pending[:0], r.pending[n:]...)
		r.mu.Unlock()
		r.run(batch)
	}
}

func (r *Redis) run(batch []*consume) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	cmds := make([]*redis.BoolCmd, len(batch))
	// Per-command errors are read from each command below; the pipeline's
	// own error matters only when the replicas did not acknowledge it.
	perr := r.c.AckPipelined(ctx, func(pipe redis.Pipeliner) {
		for i, p := range batch {
			cmds[i] = pipe.SetNX(ctx, p.key, 1, p.ttl)
		}
	})
	unacked := errors.Is(perr, redisclient.ErrNotReplicated)
	for i, p := range batch {
		ok, err := cmds[i].Result()
		switch {
		case err != nil:
			p.done <- fmt.Errorf("%w: %v", ErrUnavailable, err)
		case !ok:
			p.done <- ErrAlreadyUsed
		case unacked:
			// Recorded on the primary only: a failover now could forget
			// it and accept the lease again, so it is not accepted now.
			p.done <- fmt.Errorf("%w: %v", ErrUnavailable, perr)
		default:
			p.done <- nil
		}
	}
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
	return m.setNX("lease:"+leaseID, ttl)
}

func (m *Memory) setNX(key string, ttl time.Duration) error {
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
	if until, ok := m.used[key]; ok && now.Before(until) {
		return ErrAlreadyUsed
	}
	m.used[key] = now.Add(max(ttl, MinTTL))
	return nil
}
