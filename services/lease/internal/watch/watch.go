// Package watch is the lease service's view of the registry and discovery
// Watch streams, kept by the shared follower (platform/changelog): the
// tenants' policy epochs and the active pointers, for Verify's freshness
// check ([admissionview.Freshness]), and the automatic freeze of issuance on a
// discovery ROLLBACK or CLOSE move (I10).
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/services/lease/admissionview"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// FreezeBy is the `changed_by` of an automatic freeze.
const FreezeBy = "discovery-watch"

// Freezer records an automatic freeze ([store.Store.AutoFreeze]).
type Freezer interface {
	AutoFreeze(ctx context.Context, server string, rev int64, acceptedAt time.Time, reason, by string) (bool, error)
}

// Options configure a [View].
type Options struct {
	Registry  registryv1.RegistryServiceClient
	Discovery discoveryv1.DiscoveryServiceClient
	// Window is how old the newest heartbeat of each stream may be before
	// Check fails closed (ErrStale).
	Window time.Duration
	// Freezer receives the automatic freezes; nil records none.
	Freezer Freezer
	// Frozen is called after each automatic freeze (metrics); nil for none.
	Frozen func()
	Logger *slog.Logger
	Now    func() time.Time
	// MinBackoff and StallTimeout of the followers; 0 for their defaults.
	MinBackoff, StallTimeout time.Duration
}

type pair struct{ server, class string }

type pointer struct {
	generation int64
	closed     bool
	freshUntil time.Time
}

// View is the followed state. Create it with [New], run it with [View.Run].
type View struct {
	o     Options
	reg   *changelog.Follower[*registryv1.Change]
	disc  *changelog.Follower[*discoveryv1.PointerChange]
	heads *changelog.Heads // the two followers' freshness (I8)

	mu       sync.RWMutex
	epochs   map[string]int64
	revokes  map[subjectKey][]Revocation // oldest first, at most maxRevocations per subject
	pointers map[pair]pointer
	digests  *lru.Cache[pair, toolDigests] // of the active generation, read on demand
}

type toolDigests struct {
	generation int64
	byTool     map[string]string
}

// maxDigestSets bounds the cached descriptor-digest sets; past it the
// least recently used set is dropped (and read again when needed).
const maxDigestSets = 4096

// New returns a view; nothing is followed until Run.
func New(o Options) *View {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	digests, _ := lru.New[pair, toolDigests](maxDigestSets)
	v := &View{o: o, epochs: map[string]int64{}, revokes: map[subjectKey][]Revocation{}, pointers: map[pair]pointer{}, digests: digests}
	v.reg = changelog.NewFollower(changelog.FollowerConfig[*registryv1.Change]{
		Name: "registry", Source: changelog.RegistrySource(o.Registry), Logger: o.Logger,
		MinBackoff: o.MinBackoff, StallTimeout: o.StallTimeout,
		// Watch from 0 replays every change still kept; a tenant older
		// than that is read on first use (epochOf).
		List: func(context.Context) (int64, error) {
			v.mu.Lock()
			clear(v.epochs)
			clear(v.revokes)
			v.mu.Unlock()
			return 0, nil
		},
		Apply: func(_ context.Context, _ int64, ch *registryv1.Change) error { v.applyRegistry(ch); return nil },
	})
	v.disc = changelog.NewFollower(changelog.FollowerConfig[*discoveryv1.PointerChange]{
		Name: "discovery", Source: changelog.DiscoverySource(o.Discovery), Logger: o.Logger,
		MinBackoff: o.MinBackoff, StallTimeout: o.StallTimeout,
		List: func(context.Context) (int64, error) {
			v.mu.Lock()
			clear(v.pointers)
			v.digests.Purge()
			v.mu.Unlock()
			return 0, nil
		},
		Apply: v.applyDiscovery,
	})
	v.heads = changelog.NewHeads(o.Window, o.Now)
	v.heads.Follow(changelog.RegistryHead, v.reg.Freshness)
	v.heads.Follow(changelog.DiscoveryHead, v.disc.Freshness)
	return v
}

// Run follows both streams until ctx ends.
func (v *View) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = v.reg.Run(ctx) }()
	go func() { defer wg.Done(); _ = v.disc.Run(ctx) }()
	wg.Wait()
	return nil
}

// Fresh reports whether both streams' newest heartbeats are younger than
// the window ([changelog.Heads.Fresh]: one exactly the window old is
// stale), and which is behind when not.
func (v *View) Fresh() (bool, string) { return v.heads.Fresh() }

func (v *View) applyRegistry(ch *registryv1.Change) {
	var tenant string
	var epoch int64
	switch {
	case ch.GetPolicy() != nil:
		tenant, epoch = ch.GetPolicy().GetTenantId(), ch.GetPolicy().GetPolicyEpoch()
		if pc := ch.GetPolicy(); changelog.PolicyCause(pc) == registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_REVOKE && pc.GetGrant().GetSubject() != "" {
			v.addRevocation(Revocation{Tenant: tenant, Subject: pc.GetGrant().GetSubject(), Epoch: epoch,
				CommittedAt: ch.GetCommittedAt().AsTime(), Revision: ch.GetRevision()})
		}
	case ch.GetTenant() != nil:
		tenant, epoch = ch.GetTenant().GetTenantId(), ch.GetTenant().GetPolicyEpoch()
	default:
		return
	}
	v.setEpoch(tenant, epoch)
}

// maxRevocations bounds the revocations kept per subject (the newest);
// maxRevokedSubjects bounds the subjects: when full the history starts
// over, and a lease issued long after an older revocation is missed.
const (
	maxRevocations     = 16
	maxRevokedSubjects = 65_536
)

type subjectKey struct{ tenant, subject string }

// Revocation is one revocation of a subject's grant, as the registry's
// Watch stream reported it.
type Revocation struct {
	Tenant, Subject string
	// Epoch is the policy epoch the revocation made.
	Epoch int64
	// CommittedAt is the registry's commit time.
	CommittedAt time.Time
	// Revision is the registry revision of the change.
	Revision int64
}

func (v *View) addRevocation(r Revocation) {
	v.mu.Lock()
	defer v.mu.Unlock()
	k := subjectKey{r.Tenant, r.Subject}
	rs, ok := v.revokes[k]
	if !ok && len(v.revokes) >= maxRevokedSubjects {
		clear(v.revokes)
	}
	for _, x := range rs {
		if x.Revision == r.Revision {
			return // replayed after a reconnect
		}
	}
	rs = append(rs, r)
	if len(rs) > maxRevocations {
		rs = rs[len(rs)-maxRevocations:]
	}
	v.revokes[k] = rs
}

// RevokedBefore returns the first revocation of subject's grant in tenant
// at an epoch after epoch that committed more than allowance before
// issuedAt: a lease at epoch, issued at issuedAt, was issued on authority
// the registry had already withdrawn. Only what the stream has delivered
// (and still keeps) is known; group grants are not matched (a lease names
// no groups).
func (v *View) RevokedBefore(tenant, subject string, epoch int64, issuedAt time.Time, allowance time.Duration) (Revocation, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, r := range v.revokes[subjectKey{tenant, subject}] {
		if r.Epoch > epoch && r.CommittedAt.Add(allowance).Before(issuedAt) {
			return r, true
		}
	}
	return Revocation{}, false
}

func (v *View) setEpoch(tenant string, epoch int64) {
	v.mu.Lock()
	if epoch > v.epochs[tenant] {
		v.epochs[tenant] = epoch
	}
	v.mu.Unlock()
}

func pointerOf(p *discoveryv1.ActivePointer) pointer {
	return pointer{generation: p.GetGeneration(), closed: p.GetState() == discoveryv1.PointerState_POINTER_STATE_CLOSED,
		freshUntil: p.GetFreshUntil().AsTime()}
}

func (v *View) applyDiscovery(ctx context.Context, rev int64, ch *discoveryv1.PointerChange) error {
	p := ch.GetPointer()
	k := pair{p.GetServerId(), p.GetAudienceClass()}
	v.mu.Lock()
	v.pointers[k] = pointerOf(p)
	if d, ok := v.digests.Peek(k); ok && d.generation != p.GetGeneration() {
		v.digests.Remove(k)
	}
	v.mu.Unlock()
	move := ch.GetReceipt().GetMove()
	if v.o.Freezer == nil || (move != catalogv1.PointerMove_POINTER_MOVE_ROLLBACK && move != catalogv1.PointerMove_POINTER_MOVE_CLOSE) {
		return nil
	}
	reason := fmt.Sprintf("discovery %s of %s to generation %d (revision %d)", moveName(move), p.GetAudienceClass(), p.GetGeneration(), rev)
	froze, err := v.o.Freezer.AutoFreeze(ctx, p.GetServerId(), rev, ch.GetReceipt().GetAcceptedAt().AsTime(), reason, FreezeBy)
	if err != nil {
		return fmt.Errorf("automatic freeze of %s: %w", p.GetServerId(), err) // the follower retries from this move
	}
	if froze {
		v.o.Logger.InfoContext(ctx, "audit: lease issuance frozen", "server_id", p.GetServerId(), "frozen", true,
			"by", FreezeBy, "reason", reason)
		if v.o.Frozen != nil {
			v.o.Frozen()
		}
	}
	return nil
}

func moveName(m catalogv1.PointerMove) string {
	if m == catalogv1.PointerMove_POINTER_MOVE_CLOSE {
		return "CLOSE"
	}
	return "ROLLBACK"
}

// Check implements [admissionview.Freshness]. It answers from the followed
// heads; a tenant or pointer the streams have not mentioned (older than
// the kept history), and the descriptor digests of an active generation
// newer than the lease's, are read once from the registry or discovery and
// remembered.
func (v *View) Check(ctx context.Context, b admissionview.Binding) (admissionview.Verdict, error) {
	if ok, why := v.Fresh(); !ok {
		return 0, fmt.Errorf("%w: %s", admissionview.ErrStale, why)
	}
	epoch, err := v.epochOf(ctx, b.Tenant)
	if err != nil {
		return 0, err
	}
	if epoch > b.PolicyEpoch {
		return admissionview.PolicyChanged, nil
	}
	k := pair{b.Server, b.AudienceClass}
	p, err := v.pointerFor(ctx, k, b.Generation)
	if err != nil {
		return 0, err
	}
	switch {
	case p.closed, !v.o.Now().Before(p.freshUntil), b.Generation > p.generation:
		return admissionview.StaleCatalog, nil
	case b.Generation == p.generation:
		return admissionview.Current, nil
	}
	// An older generation is compatible when the tool's descriptor is
	// unchanged in the active one.
	d, err := v.digestsOf(ctx, k, p.generation)
	if err != nil {
		return 0, err
	}
	if got, ok := d[b.Tool]; ok && got == b.DescriptorDigest {
		return admissionview.Current, nil
	}
	return admissionview.StaleCatalog, nil
}

func (v *View) epochOf(ctx context.Context, tenant string) (int64, error) {
	v.mu.RLock()
	e, ok := v.epochs[tenant]
	v.mu.RUnlock()
	if ok {
		return e, nil
	}
	resp, err := v.o.Registry.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant})
	if err != nil {
		return 0, fmt.Errorf("%w: reading the policy epoch: %w", admissionview.ErrStale, err)
	}
	v.setEpoch(tenant, resp.GetPolicy().GetPolicyEpoch())
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.epochs[tenant], nil
}

// pointerFor returns the followed pointer of k, or, when generation is
// newer than it (admission decided on a generation this follower's stream
// has not delivered yet: the two services follow discovery on their own
// streams; also past a followed CLOSE, which a newer generation reopened),
// the pointer read once from discovery for this verdict. The
// read is not kept, so a rollback the stream delivers meanwhile is never
// overwritten by it.
func (v *View) pointerFor(ctx context.Context, k pair, generation int64) (pointer, error) {
	p, err := v.pointerOf(ctx, k)
	if err != nil || generation <= p.generation {
		return p, err
	}
	return v.readPointer(ctx, k)
}

func (v *View) readPointer(ctx context.Context, k pair) (pointer, error) {
	resp, err := v.o.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{
		ServerId: k.server, AudienceClass: k.class, ToolsPageSize: 1})
	if err != nil {
		return pointer{}, fmt.Errorf("%w: reading the active pointer: %w", admissionview.ErrStale, err)
	}
	return pointerOf(resp.GetPointer()), nil
}

func (v *View) pointerOf(ctx context.Context, k pair) (pointer, error) {
	v.mu.RLock()
	p, ok := v.pointers[k]
	v.mu.RUnlock()
	if ok {
		return p, nil
	}
	p, err := v.readPointer(ctx, k)
	if err != nil {
		return pointer{}, err
	}
	v.mu.Lock()
	if cur, ok := v.pointers[k]; ok { // the stream delivered it meanwhile
		p = cur
	} else {
		v.pointers[k] = p
	}
	v.mu.Unlock()
	return p, nil
}

// errMoved: the pointer moved while the digests were read.
var errMoved = errors.New("the active generation moved while its tools were read")

func (v *View) digestsOf(ctx context.Context, k pair, generation int64) (map[string]string, error) {
	v.mu.RLock()
	d, ok := v.digests.Get(k)
	v.mu.RUnlock()
	if ok && d.generation == generation {
		return d.byTool, nil
	}
	byTool := map[string]string{}
	token := ""
	for {
		resp, err := v.o.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{
			ServerId: k.server, AudienceClass: k.class, ToolsPageSize: 1000, ToolsPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("%w: reading the active generation's tools: %w", admissionview.ErrStale, err)
		}
		if resp.GetPointer().GetGeneration() != generation {
			return nil, fmt.Errorf("%w: %w", admissionview.ErrStale, errMoved)
		}
		for _, t := range resp.GetSnapshot().GetTools() {
			byTool[t.GetToolId()] = t.GetDescriptorDigest()
		}
		if token = resp.GetNextToolsPageToken(); token == "" {
			break
		}
	}
	v.mu.Lock()
	v.digests.Add(k, toolDigests{generation: generation, byTool: byTool})
	v.mu.Unlock()
	return byTool, nil
}
