package keyring

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Options configure a [Ring].
type Options struct {
	// Lifetime is the longest lifetime of a token the ring signs; a retired
	// key stays published for Lifetime + Skew + SignLag after its
	// retirement. Required.
	Lifetime time.Duration
	// RotateEvery is the age at which [Ring.Maintain] replaces the current
	// key; 0 disables scheduled rotation.
	RotateEvery time.Duration
	// Skew is the clock-skew allowance verifiers grant on `exp`.
	Skew time.Duration
	// SignLag is how long another replica sharing the source may still sign
	// with a key after it was retired here: until its next [Ring.Refresh]
	// (its key-check interval). Tokens it signs then live up to Lifetime
	// longer, so the key stays published that much longer.
	SignLag time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Ring is one service's view of its keys: the current signing key and the
// published public keys. It is safe for concurrent use.
type Ring struct {
	src  Source
	opts Options

	mu   sync.RWMutex
	keys []Key // newest first

	// cache is the published key set, built once per change of the keys
	// rather than per verification; it holds until cacheUntil (the next
	// retired key's end of retention) or the next Refresh.
	cacheMu    sync.Mutex
	cache      *KeySet
	cacheUntil time.Time
}

// NewRing loads the source's keys and, when none may sign, creates one.
func NewRing(ctx context.Context, src Source, opts Options) (*Ring, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Lifetime <= 0 {
		return nil, errors.New("keyring: the longest token lifetime must be positive")
	}
	if opts.RotateEvery < 0 || opts.Skew < 0 || opts.SignLag < 0 {
		return nil, errors.New("keyring: negative rotation interval, skew or sign lag")
	}
	r := &Ring{src: src, opts: opts}
	if err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	if _, ok := r.current(); !ok {
		if _, err := r.Rotate(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Retention is how long a retired key stays published: the longest token
// lifetime plus the skew allowance, plus the time another replica may
// still sign with it (SignLag).
func (r *Ring) Retention() time.Duration { return r.opts.Lifetime + r.opts.Skew + r.opts.SignLag }

// Skew is the clock-skew allowance the ring was configured with.
func (r *Ring) Skew() time.Duration { return r.opts.Skew }

// Refresh reloads the keys from the source (another replica may have
// rotated).
func (r *Ring) Refresh(ctx context.Context) error {
	ks, err := r.src.Keys(ctx)
	if err != nil {
		return fmt.Errorf("keyring: load: %w", err)
	}
	sort.Slice(ks, func(i, j int) bool {
		if !ks[i].CreatedAt.Equal(ks[j].CreatedAt) {
			return ks[i].CreatedAt.After(ks[j].CreatedAt)
		}
		return ks[i].ID > ks[j].ID
	})
	r.mu.Lock()
	r.keys = ks
	r.mu.Unlock()
	r.cacheMu.Lock()
	r.cache = nil
	r.cacheMu.Unlock()
	return nil
}

// current returns the newest key not retired.
func (r *Ring) current() (Key, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, k := range r.keys {
		if k.RetiredAt.IsZero() {
			return k, true
		}
	}
	return Key{}, false
}

// Current returns the key new tokens are signed with.
func (r *Ring) Current() (Key, error) {
	k, ok := r.current()
	if !ok {
		return Key{}, errors.New("keyring: no current signing key")
	}
	return k, nil
}

// Rotation is what one [Ring.Rotate] did.
type Rotation struct {
	// Current is the new current key.
	Current Key
	// Retired are the ids of the keys it retired.
	Retired []string
	// At is when it took effect.
	At time.Time
	// PublishedUntil is until when the retired keys stay published
	// (At + [Ring.Retention]).
	PublishedUntil time.Time
}

// Rotate makes a new current key now and retires every other key that
// could still sign. Tokens the old keys signed keep verifying until they
// expire.
func (r *Ring) Rotate(ctx context.Context) (Rotation, error) {
	now := r.opts.Now()
	nk, err := r.src.Create(ctx, now)
	if err != nil {
		return Rotation{}, fmt.Errorf("keyring: create: %w", err)
	}
	r.mu.RLock()
	var retire []string
	for _, k := range r.keys {
		if k.RetiredAt.IsZero() && k.ID != nk.ID {
			retire = append(retire, k.ID)
		}
	}
	r.mu.RUnlock()
	for _, id := range retire {
		if err := r.src.Retire(ctx, id, now); err != nil && !errors.Is(err, ErrUnknownKey) {
			return Rotation{}, fmt.Errorf("keyring: retire: %w", err)
		}
	}
	if err := r.Refresh(ctx); err != nil {
		return Rotation{}, err
	}
	return Rotation{Current: nk, Retired: retire, At: now, PublishedUntil: now.Add(r.Retention())}, nil
}

// Maintain is the scheduled work: reload, rotate when the current key is
// RotateEvery old, destroy retired keys whose tokens have all expired.
func (r *Ring) Maintain(ctx context.Context) error {
	if err := r.Refresh(ctx); err != nil {
		return err
	}
	now := r.opts.Now()
	cur, ok := r.current()
	if !ok || (r.opts.RotateEvery > 0 && now.Sub(cur.CreatedAt) >= r.opts.RotateEvery) {
		if _, err := r.Rotate(ctx); err != nil {
			return err
		}
	}
	r.mu.RLock()
	var expired []string
	for _, k := range r.keys {
		if !k.RetiredAt.IsZero() && !now.Before(k.RetiredAt.Add(r.Retention())) {
			expired = append(expired, k.ID)
		}
	}
	r.mu.RUnlock()
	for _, id := range expired {
		if err := r.src.Destroy(ctx, id); err != nil && !errors.Is(err, ErrUnknownKey) {
			return fmt.Errorf("keyring: destroy: %w", err)
		}
	}
	if len(expired) > 0 {
		return r.Refresh(ctx)
	}
	return nil
}

// Run calls Maintain every interval until ctx ends; a failure is reported
// to onError and retried on the next tick.
func (r *Ring) Run(ctx context.Context, interval time.Duration, onError func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.Maintain(ctx); err != nil && ctx.Err() == nil && onError != nil {
			onError(err)
		}
	}
}

// published returns the keys a live token may be signed with: the current
// one and retired ones within their retention.
func (r *Ring) published() map[string]ed25519.PublicKey {
	now := r.opts.Now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]ed25519.PublicKey, len(r.keys))
	for _, k := range r.keys {
		if k.RetiredAt.IsZero() || now.Before(k.RetiredAt.Add(r.Retention())) {
			out[k.ID] = k.Public
		}
	}
	return out
}

// KeySet returns the published keys, for verifying.
func (r *Ring) KeySet() KeySet {
	now := r.opts.Now()
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	if r.cache != nil && now.Before(r.cacheUntil) {
		return *r.cache
	}
	ks := NewKeySet(r.published())
	until := now.Add(time.Hour)
	r.mu.RLock()
	for _, k := range r.keys {
		if end := k.RetiredAt.Add(r.Retention()); !k.RetiredAt.IsZero() && end.After(now) && end.Before(until) {
			until = end
		}
	}
	r.mu.RUnlock()
	r.cache, r.cacheUntil = &ks, until
	return ks
}

// JWKS returns the published keys as a JWKS document and the current key
// id (a service's GetSigningKeys).
func (r *Ring) JWKS() ([]byte, string, error) {
	doc, err := MarshalJWKS(r.published())
	if err != nil {
		return nil, "", err
	}
	cur, _ := r.current()
	return doc, cur.ID, nil
}

// CurrentAge is how old the current key is (a metric).
func (r *Ring) CurrentAge() time.Duration {
	cur, ok := r.current()
	if !ok {
		return 0
	}
	return r.opts.Now().Sub(cur.CreatedAt)
}
