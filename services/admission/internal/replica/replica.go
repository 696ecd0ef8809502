package replica

import (
	"context"
	"errors"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
)

// Errors of the sources.
var (
	// ErrNotFound: the source has no such object (tenant, generation, tool).
	ErrNotFound = errors.New("replica: not found")
	// ErrNotKept: the source no longer holds the object at that epoch or
	// generation (compacted history, retired generation).
	ErrNotKept = errors.New("replica: not kept")
)

// Policy is a tenant's policy at one epoch.
type Policy struct {
	Tenant string
	Epoch  int64
	Grants []decision.Grant
	// Classes maps each audience class of the tenant to the servers it reads.
	Classes map[string][]string
	// Stages holds the rollout stage of every (server, class) pair that is
	// not FULL at this epoch; a pair not in it is FULL.
	Stages map[StageKey]*decision.Rollout
}

// StageKey names one (server, audience class) pair's rollout stage.
type StageKey struct{ Server, Class string }

// Rollout returns the rollout stage of (server, class) at the policy's
// epoch; nil for FULL.
func (p Policy) Rollout(server, class string) *decision.Rollout {
	return p.Stages[StageKey{server, class}]
}

// Policies reads tenants' policies from the registry.
type Policies interface {
	// PolicyAt returns the tenant's policy exactly at epoch. ErrNotFound
	// when the tenant does not exist; ErrNotKept when the registry cannot
	// answer for that epoch (an older epoch whose history is gone, or a
	// registry that only answers the current epoch and has moved on).
	PolicyAt(ctx context.Context, tenant string, epoch int64) (Policy, error)
	// Current returns the tenant's policy at its current epoch (used to
	// learn a tenant's epoch before its first Watch change).
	Current(ctx context.Context, tenant string) (Policy, error)
}

// ToolEntry is one tool of a generation.
type ToolEntry struct {
	ToolID, Name, Title, Description string
	DescriptorDigest                 string
	InputSchemaDigest                string
	// InputSchema is the `inputSchema` member of the raw descriptor.
	InputSchema []byte
}

// Generation is the tools of one committed generation.
type Generation struct {
	ServerID, Class string
	Generation      int64
	State           catalogv1.DiscoveryState
	Tools           map[string]*ToolEntry // by tool id
}

// Catalog reads committed generations from discovery.
type Catalog interface {
	// Generation returns every tool of (server, class, generation).
	// ErrNotFound or ErrNotKept when discovery does not hold it.
	Generation(ctx context.Context, server, class string, generation int64) (*Generation, error)
}

// Reviews reads a tool's review from the registry.
type Reviews interface {
	// Review answers, for the tenant's audience class at epoch: is the
	// tool enabled, and which approved contract binds exactly
	// descriptorDigest under the tool's current contract (nil when none).
	// Known is false when the registry has no such tool for the class. The
	// answer must be the one in force at epoch: the registry bumps the
	// epoch of every tenant that can see the tool whenever its enablement,
	// contract or approvals change.
	Review(ctx context.Context, tenant string, epoch int64, class, toolID, descriptorDigest string) (decision.Review, error)
}

// Material caches the immutable material, fetching on a miss; concurrent
// misses of one key make one fetch.
type Material struct {
	policies Policies
	catalog  Catalog
	reviews  Reviews

	pol *lru.Cache[policyKey, Policy]
	// gone remembers epochs the registry no longer holds: that never
	// changes, so a plan made at such an epoch costs no read per call.
	gone *lru.Cache[policyKey, struct{}]
	gens *lru.Cache[genKey, *Generation]
	revs *lru.Cache[reviewKey, decision.Review]
	sf   singleflight.Group
}

type policyKey struct {
	tenant string
	epoch  int64
}

type genKey struct {
	server, class string
	gen           int64
}

type reviewKey struct {
	tenant, class string
	epoch         int64
	tool, digest  string
}

// NewMaterial returns a material cache over the sources, each level
// keeping at most size entries.
func NewMaterial(p Policies, c Catalog, r Reviews, size int) *Material {
	m := &Material{policies: p, catalog: c, reviews: r}
	m.pol, _ = lru.New[policyKey, Policy](size)
	m.gone, _ = lru.New[policyKey, struct{}](size)
	m.gens, _ = lru.New[genKey, *Generation](max(size/16, 64))
	m.revs, _ = lru.New[reviewKey, decision.Review](size)
	return m
}

// PolicyAt returns the tenant's policy at epoch (cached).
func (m *Material) PolicyAt(ctx context.Context, tenant string, epoch int64) (Policy, error) {
	k := policyKey{tenant, epoch}
	if p, ok := m.pol.Get(k); ok {
		return p, nil
	}
	if m.gone.Contains(k) {
		return Policy{}, ErrNotKept
	}
	v, err, _ := m.sf.Do("p\x00"+tenant+"\x00"+itoa(epoch), func() (any, error) {
		return m.policies.PolicyAt(ctx, tenant, epoch)
	})
	if errors.Is(err, ErrNotKept) {
		m.gone.Add(k, struct{}{})
	}
	if err != nil {
		return Policy{}, err
	}
	p := v.(Policy)
	m.pol.Add(k, p)
	return p, nil
}

// Current returns the tenant's current policy from the registry and
// remembers it under its epoch.
func (m *Material) Current(ctx context.Context, tenant string) (Policy, error) {
	p, err := m.policies.Current(ctx, tenant)
	if err != nil {
		return Policy{}, err
	}
	m.Remember(p)
	return p, nil
}

// Remember stores a policy read elsewhere (the current one, or one from
// the Watch stream) under its epoch: it is immutable from then on.
func (m *Material) Remember(p Policy) { m.pol.Add(policyKey{p.Tenant, p.Epoch}, p) }

// Generation returns a generation's tools (cached).
func (m *Material) Generation(ctx context.Context, server, class string, gen int64) (*Generation, error) {
	k := genKey{server, class, gen}
	if g, ok := m.gens.Get(k); ok {
		return g, nil
	}
	v, err, _ := m.sf.Do("g\x00"+server+"\x00"+class+"\x00"+itoa(gen), func() (any, error) {
		return m.catalog.Generation(ctx, server, class, gen)
	})
	if err != nil {
		return nil, err
	}
	g := v.(*Generation)
	m.gens.Add(k, g)
	return g, nil
}

// Review returns a tool's review for the class at epoch for digest
// (cached).
func (m *Material) Review(ctx context.Context, tenant string, epoch int64, class, toolID, digest string) (decision.Review, error) {
	k := reviewKey{tenant, class, epoch, toolID, digest}
	if r, ok := m.revs.Get(k); ok {
		return r, nil
	}
	v, err, _ := m.sf.Do("r\x00"+tenant+"\x00"+class+"\x00"+itoa(epoch)+"\x00"+toolID+"\x00"+digest, func() (any, error) {
		return m.reviews.Review(ctx, tenant, epoch, class, toolID, digest)
	})
	if err != nil {
		return decision.Review{}, err
	}
	r := v.(decision.Review)
	m.revs.Add(k, r)
	return r, nil
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	if n == 0 {
		return "0"
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// Pointer is the head of one active pointer.
type Pointer struct {
	ServerID, Class, Tenant string
	Generation              int64
	Closed                  bool
	Unversioned             bool
	FreshUntil              time.Time
	// Revision is discovery's revision of the last move; a head is only
	// replaced by one with a larger revision.
	Revision int64
}

// Heads is the replica's live view: the streams' freshness
// ([changelog.Heads], I8), the tenants' epochs and the active pointers.
// Safe for concurrent use.
type Heads struct {
	*changelog.Heads

	mu       sync.RWMutex
	epochs   map[string]int64
	pointers map[[2]string]Pointer
}

// NewHeads returns empty heads with the validity window (I8).
func NewHeads(window time.Duration, now func() time.Time) *Heads {
	return &Heads{Heads: changelog.NewHeads(window, now), epochs: map[string]int64{}, pointers: map[[2]string]Pointer{}}
}

// SetEpoch raises the tenant's epoch to epoch (never lowers it).
func (h *Heads) SetEpoch(tenant string, epoch int64) {
	h.mu.Lock()
	if epoch > h.epochs[tenant] {
		h.epochs[tenant] = epoch
	}
	h.mu.Unlock()
}

// Epoch returns the tenant's current epoch; ok false when not yet known.
func (h *Heads) Epoch(tenant string) (int64, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	e, ok := h.epochs[tenant]
	return e, ok
}

// SetPointer stores p unless a head with a larger revision is held.
func (h *Heads) SetPointer(p Pointer) {
	k := [2]string{p.ServerID, p.Class}
	h.mu.Lock()
	if cur, ok := h.pointers[k]; !ok || p.Revision >= cur.Revision {
		h.pointers[k] = p
	}
	h.mu.Unlock()
}

// Tenants returns the tenants whose epoch the heads know.
func (h *Heads) Tenants() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]string, 0, len(h.epochs))
	for t := range h.epochs {
		out = append(out, t)
	}
	return out
}

// PointerKeys returns the (server, class) pairs the heads hold.
func (h *Heads) PointerKeys() [][2]string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([][2]string, 0, len(h.pointers))
	for k := range h.pointers {
		out = append(out, k)
	}
	return out
}

// Pointer returns the head of (server, class).
func (h *Heads) Pointer(server, class string) (Pointer, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	p, ok := h.pointers[[2]string{server, class}]
	return p, ok
}
