package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
)

// Key names one preliminary decision. Every field takes part in
// [Key.String]; TestKeyUsesEveryField fails when one is added and left out.
type Key struct {
	Tenant        string
	AudienceClass string
	// PolicyEpoch is the tenant's current epoch.
	PolicyEpoch int64
	// Generation is the pointer's generation; PointerRevision the
	// discovery revision of its last move.
	Generation      int64
	PointerRevision int64
	ToolID          string
	// DescriptorDigest is the plan's digest.
	DescriptorDigest string
	// ScopeSetDigest is [ScopeSetDigest] of the principal's access.
	ScopeSetDigest string
	Mode           admissionv1.Mode
	PlanGeneration int64
	PlanEpoch      int64
	// CanaryRun is where the request's run falls in the pair's rollout
	// stage (decision.Rollout.RunOf); the stage itself is fixed by the
	// tenant, class, epoch and tool id, so this is all the run adds.
	CanaryRun decision.CanaryRun
	// PlanCanaryRun is the same at the plan's epoch, when its policy is
	// known (it decides FORBIDDEN against POLICY_REVOKED); NotCanary
	// otherwise.
	PlanCanaryRun decision.CanaryRun
}

// String is the one encoding of a key: each field length-prefixed, the
// tenant first. It is injective: two keys differing in any field differ.
func (k Key) String() string {
	var b strings.Builder
	b.Grow(96 + len(k.Tenant) + len(k.AudienceClass) + len(k.ToolID) + len(k.DescriptorDigest) + len(k.ScopeSetDigest))
	str := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
		b.WriteByte('|')
	}
	num := func(n int64) { str(strconv.FormatInt(n, 10)) }
	str(k.Tenant)
	str(k.AudienceClass)
	num(k.PolicyEpoch)
	num(k.Generation)
	num(k.PointerRevision)
	str(k.ToolID)
	str(k.DescriptorDigest)
	str(k.ScopeSetDigest)
	num(int64(k.Mode))
	num(k.PlanGeneration)
	num(k.PlanEpoch)
	num(int64(k.CanaryRun))
	num(int64(k.PlanCanaryRun))
	return b.String()
}

// ScopeSetDigest is the digest of what the principal holds: its access at
// the current epoch and, when the plan named an older epoch whose policy is
// known, at that epoch (it decides FORBIDDEN against POLICY_REVOKED). Two
// principals with the same digest get the same decisions.
func ScopeSetDigest(current decision.Access, planned *decision.Access) string {
	h := sha256.New()
	write := func(tag string, xs []string) {
		h.Write([]byte(tag))
		for _, x := range xs {
			h.Write([]byte(strconv.Itoa(len(x)) + ":" + x))
		}
		h.Write([]byte{0})
	}
	write("s", current.Scopes)
	write("c", current.Classes)
	if planned != nil {
		write("ps", planned.Scopes)
		write("pc", planned.Classes)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Entry is one cached preliminary decision with what the caller needs to
// finish it without another read.
type Entry struct {
	Reason decision.Reason `json:"r"`
	Detail string          `json:"d"`
	// ServerID, ActiveDigest (the descriptor digest in the pointer's
	// generation), InputSchemaDigest and Effect come from the facts.
	ServerID          string                `json:"s,omitempty"`
	ActiveDigest      string                `json:"a,omitempty"`
	InputSchemaDigest string                `json:"i,omitempty"`
	Effect            catalogv1.EffectClass `json:"e,omitempty"`
	// Scope and ApprovalDigest are the approved contract's scope and the
	// approval digest in force: what the grants' conditions read of the
	// tool after the cache (they are evaluated on every call, never
	// cached).
	Scope          string `json:"sc,omitempty"`
	ApprovalDigest string `json:"ad,omitempty"`
	// ExpiresAt bounds the entry: the earliest of the cache lifetime and
	// the pointer's fresh_until.
	ExpiresAt time.Time `json:"x"`
}

// Level says where a lookup was answered.
type Level int

// The levels.
const (
	Miss Level = iota
	L1
	L2
)

func (l Level) String() string { return [...]string{"miss", "l1", "l2"}[l] }

// Options configures a [Cache].
type Options struct {
	// L1Size is the most entries kept in process.
	L1Size int
	// Redis is the L2; nil for none.
	Redis *redisclient.Client
	// RedisTimeout bounds one Redis read on the hot path.
	RedisTimeout time.Duration
	// Backoff is how long the L2 is skipped after a Redis error.
	Backoff time.Duration
	// WriteQueue is how many L2 writes may wait; more are dropped.
	WriteQueue int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// SkipL1 answers every lookup from L2 (or misses): the benchmark of
	// the L1-miss path. Never set in service.
	SkipL1 bool
}

// Cache is the two-level decision cache.
type Cache struct {
	opts Options
	// l1 is keyed by the Key itself: comparing every field is the same
	// injective identity as [Key.String] without building the string on
	// every lookup (it is built for L2 only).
	l1        *lru.Cache[Key, Entry]
	downUntil atomic.Int64 // unix nanos; L2 skipped before it
	writes    chan write
	stats     [3]atomic.Int64
	l2Errors  atomic.Int64
	dropped   atomic.Int64
	pending   atomic.Int64
	wg        sync.WaitGroup
	closeOnce sync.Once
}

type write struct {
	key string
	val []byte
	ttl time.Duration
}

// New returns a cache; call [Cache.Close] to stop its writer.
func New(o Options) *Cache {
	if o.L1Size <= 0 {
		o.L1Size = 100_000
	}
	if o.RedisTimeout <= 0 {
		o.RedisTimeout = 50 * time.Millisecond
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.WriteQueue <= 0 {
		o.WriteQueue = 4096
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l1, err := lru.New[Key, Entry](o.L1Size)
	if err != nil {
		panic(err)
	}
	c := &Cache{opts: o, l1: l1, writes: make(chan write, o.WriteQueue)}
	if o.Redis != nil {
		c.wg.Add(1)
		go c.writer()
	}
	return c
}

// Close stops the L2 writer after the queued writes.
func (c *Cache) Close() {
	c.closeOnce.Do(func() {
		close(c.writes)
		c.wg.Wait()
	})
}

func (c *Cache) redisKey(k string) string { return c.opts.Redis.Key("dc", k) }

func (c *Cache) l2Usable() bool {
	return c.opts.Redis != nil && c.opts.Now().UnixNano() >= c.downUntil.Load()
}

func (c *Cache) l2Failed() {
	c.l2Errors.Add(1)
	c.downUntil.Store(c.opts.Now().Add(c.opts.Backoff).UnixNano())
}

// Get looks k up in L1, then L2. An expired entry is a miss. A Redis error
// is a miss (and starts the back-off).
func (c *Cache) Get(ctx context.Context, k Key) (Entry, Level) {
	now := c.opts.Now()
	if e, ok := c.l1.Get(k); ok && !c.opts.SkipL1 {
		if now.Before(e.ExpiresAt) {
			c.stats[L1].Add(1)
			return e, L1
		}
		c.l1.Remove(k)
	}
	if c.l2Usable() {
		ks := k.String()
		rctx, cancel := context.WithTimeout(ctx, c.opts.RedisTimeout)
		raw, err := c.opts.Redis.Get(rctx, c.redisKey(ks)).Bytes()
		cancel()
		switch {
		case err == nil:
			var e Entry
			if json.Unmarshal(raw, &e) == nil && now.Before(e.ExpiresAt) {
				c.l1.Add(k, e)
				c.stats[L2].Add(1)
				return e, L2
			}
		case errors.Is(err, redis.Nil):
		default:
			if ctx.Err() == nil { // not the caller giving up
				c.l2Failed()
			}
		}
	}
	c.stats[Miss].Add(1)
	return Entry{}, Miss
}

// Put stores e under k in L1 and queues it for L2. An entry already
// expired is not stored.
func (c *Cache) Put(k Key, e Entry) {
	ttl := e.ExpiresAt.Sub(c.opts.Now())
	if ttl <= 0 {
		return
	}
	c.l1.Add(k, e)
	if c.opts.Redis == nil || !c.l2Usable() {
		return
	}
	ks := k.String()
	raw, err := json.Marshal(e)
	if err != nil {
		return
	}
	c.pending.Add(1)
	select {
	case c.writes <- write{key: c.redisKey(ks), val: raw, ttl: ttl}:
	default:
		c.pending.Add(-1)
		c.dropped.Add(1)
	}
}

func (c *Cache) writer() {
	defer c.wg.Done()
	for w := range c.writes {
		if !c.l2Usable() {
			c.dropped.Add(1)
			c.pending.Add(-1)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*c.opts.RedisTimeout)
		err := c.opts.Redis.Set(ctx, w.key, w.val, w.ttl).Err()
		cancel()
		if err != nil {
			c.l2Failed()
		}
		c.pending.Add(-1)
	}
}

// Stats are the cache's counters.
type Stats struct {
	Hits     map[Level]int64
	L2Errors int64
	// Dropped is L2 writes left out (queue full or Redis down).
	Dropped int64
	L1Len   int
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	return Stats{
		Hits:     map[Level]int64{Miss: c.stats[Miss].Load(), L1: c.stats[L1].Load(), L2: c.stats[L2].Load()},
		L2Errors: c.l2Errors.Load(),
		Dropped:  c.dropped.Load(),
		L1Len:    c.l1.Len(),
	}
}

// Flush waits until the queued L2 writes are sent (tests, benchmarks).
func (c *Cache) Flush(ctx context.Context) error {
	for c.pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
