package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/services/registry/internal/store"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

// Store is what the loop needs of the registry's store.
type Store interface {
	// DiscoveryCursor returns the discovery revision every move up to which
	// has been applied.
	DiscoveryCursor(ctx context.Context) (int64, error)
	// AdvanceDiscoveryCursor moves the cursor forward (never back).
	AdvanceDiscoveryCursor(ctx context.Context, rev int64) error
	// ResetDiscoveryCursor sets the cursor, even backwards.
	ResetDiscoveryCursor(ctx context.Context, rev int64) error
	// PairRevision returns the discovery revision of the last move applied
	// to a pair; 0 when none.
	PairRevision(ctx context.Context, p store.Pair) (int64, error)
	// SourcePairs returns every pair discovery scans or has moved.
	SourcePairs(ctx context.Context) ([]store.Pair, error)
	// ApplyPointer applies one move; a move not newer than the pair's last
	// is skipped.
	ApplyPointer(ctx context.Context, up store.PointerUpdate) (store.ApplyResult, error)
}

// Loop follows discovery's Watch into the store, with the shared follower
// ([changelog.Follower]).
type Loop struct {
	client discoveryv1.DiscoveryServiceClient
	store  Store
	logger *slog.Logger

	// MinBackoff and MaxBackoff bound the wait between failed attempts.
	MinBackoff, MaxBackoff time.Duration
	// StallTimeout is how long the stream may stay silent before the loop
	// reconnects; a few discovery heartbeat intervals.
	StallTimeout time.Duration
	// WarnEvery spaces the warnings while the store is not ready.
	WarnEvery time.Duration

	follower atomic.Pointer[changelog.Follower[*discoveryv1.PointerChange]]
}

// New returns a loop reading from client into st.
func New(client discoveryv1.DiscoveryServiceClient, st Store, logger *slog.Logger) *Loop {
	return &Loop{client: client, store: st, logger: logger,
		MinBackoff: 200 * time.Millisecond, MaxBackoff: 10 * time.Second, StallTimeout: 10 * time.Second, WarnEvery: time.Minute}
}

// Freshness returns how far the loop has followed discovery; the zero
// value before Run started following.
func (l *Loop) Freshness() changelog.Freshness {
	if f := l.follower.Load(); f != nil {
		return f.Freshness()
	}
	return changelog.Freshness{}
}

// Run follows discovery until ctx ends; it always returns nil then. It
// resumes from the stored cursor; with none stored (a new registry), or
// when discovery no longer keeps the moves after it, it re-reads every
// known pair first ([Loop.resync]).
func (l *Loop) Run(ctx context.Context) error {
	l.waitForStore(ctx)
	f := changelog.NewFollower(changelog.FollowerConfig[*discoveryv1.PointerChange]{
		Name:   "discovery",
		Source: changelog.DiscoverySource(l.client),
		Resume: func(ctx context.Context) (int64, bool, error) {
			c, err := l.store.DiscoveryCursor(ctx)
			return c, c > 0, err
		},
		List:         l.resync,
		Apply:        func(ctx context.Context, _ int64, ch *discoveryv1.PointerChange) error { return l.apply(ctx, ch) },
		Advance:      l.store.AdvanceDiscoveryCursor,
		MinBackoff:   l.MinBackoff,
		MaxBackoff:   l.MaxBackoff,
		StallTimeout: l.StallTimeout,
		Logger:       l.logger,
	})
	l.follower.Store(f)
	return f.Run(ctx)
}

// waitForStore waits, quietly, until the store answers: at start-up the
// loop runs before the migrations that create its tables.
func (l *Loop) waitForStore(ctx context.Context) {
	start := time.Now()
	for ctx.Err() == nil {
		_, err := l.store.DiscoveryCursor(ctx)
		if err == nil {
			return
		}
		level := slog.LevelDebug
		if time.Since(start) > l.WarnEvery {
			level, start = slog.LevelWarn, time.Now()
		}
		l.logger.Log(ctx, level, "waiting for the registry's tables before following discovery", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(l.MinBackoff):
		}
	}
}

// apply applies one move from the stream and stores its revision as the
// cursor in the same transaction.
func (l *Loop) apply(ctx context.Context, ch *discoveryv1.PointerChange) error {
	p := ch.GetPointer()
	pair := store.Pair{ServerID: p.GetServerId(), AudienceClass: p.GetAudienceClass()}
	applied, err := l.store.PairRevision(ctx, pair)
	if err != nil {
		return err
	}
	if ch.GetRevision() <= applied {
		// A replay (after a re-read): nothing to fetch.
		return l.store.AdvanceDiscoveryCursor(ctx, ch.GetRevision())
	}
	up, err := l.fetch(ctx, p, ch.GetRevision())
	var inconsistent *InconsistentError
	if errors.As(err, &inconsistent) {
		// Never applied, and never retried: the same snapshot would be
		// refused again. The pair keeps its previous tools; admission
		// denies what the registry has not recorded.
		l.logger.ErrorContext(ctx, "discovery sent an inconsistent snapshot; skipped", "error", err, "revision", ch.GetRevision())
		return l.store.AdvanceDiscoveryCursor(ctx, ch.GetRevision())
	}
	if err != nil {
		return err
	}
	up.Cursor = ch.GetRevision()
	return l.applyUpdate(ctx, up)
}

// fetch builds the update for pointer p moved at revision rev, reading the
// snapshot it names. A generation discovery no longer keeps is replaced by
// the pair's active one, which is newer.
func (l *Loop) fetch(ctx context.Context, p *discoveryv1.ActivePointer, rev int64) (store.PointerUpdate, error) {
	if p.GetState() == discoveryv1.PointerState_POINTER_STATE_CLOSED {
		return pointerUpdate(p, rev, nil)
	}
	resp, err := l.client.GetSnapshot(ctx, &discoveryv1.GetSnapshotRequest{
		ServerId: p.GetServerId(), AudienceClass: p.GetAudienceClass(), Generation: p.GetGeneration()})
	if status.Code(err) == codes.NotFound {
		active, err := l.client.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{
			ServerId: p.GetServerId(), AudienceClass: p.GetAudienceClass()})
		if err != nil {
			return store.PointerUpdate{}, fmt.Errorf("active snapshot of %s/%s: %w", p.GetServerId(), p.GetAudienceClass(), err)
		}
		return pointerUpdate(active.GetPointer(), max(rev, active.GetPointer().GetRevision()), active.GetSnapshot())
	}
	if err != nil {
		return store.PointerUpdate{}, fmt.Errorf("snapshot %s/%s generation %d: %w", p.GetServerId(), p.GetAudienceClass(), p.GetGeneration(), err)
	}
	return pointerUpdate(p, rev, resp.GetSnapshot())
}

// applyUpdate applies up; a snapshot that contradicts itself was refused
// by pointerUpdate and only moves the cursor.
func (l *Loop) applyUpdate(ctx context.Context, up store.PointerUpdate) error {
	res, err := l.store.ApplyPointer(ctx, up)
	if err != nil {
		return fmt.Errorf("apply %s/%s generation %d: %w", up.ServerID, up.AudienceClass, up.Generation, err)
	}
	switch {
	case res.Skipped == "unknown server":
		l.logger.WarnContext(ctx, "discovery moved a pointer of a server the registry does not know; skipped",
			"server_id", up.ServerID, "audience_class", up.AudienceClass)
	case len(res.Changed) > 0:
		l.logger.InfoContext(ctx, "tools changed at the source", "server_id", up.ServerID, "audience_class", up.AudienceClass,
			"generation", up.Generation, "tools", res.Changed)
	}
	return nil
}

// resync (the follower's List) re-reads the active pointer of every known
// pair, applies each, and sets the cursor to 0, which it returns: the next
// watch replays every move discovery still keeps (skipped per pair when not
// newer). Discovery's reads carry no revision, so 0 — the oldest move kept
// — is the start that leaves no gap, as long as discovery keeps moves
// longer than a resync takes (it keeps a day, and at least 1,000 moves).
func (l *Loop) resync(ctx context.Context) (int64, error) {
	pairs, err := l.store.SourcePairs(ctx)
	if err != nil {
		return 0, err
	}
	for _, pair := range pairs {
		resp, err := l.client.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{
			ServerId: pair.ServerID, AudienceClass: pair.AudienceClass})
		if status.Code(err) == codes.NotFound {
			continue // never committed
		}
		if err != nil {
			return 0, fmt.Errorf("active snapshot of %s/%s: %w", pair.ServerID, pair.AudienceClass, err)
		}
		up, err := pointerUpdate(resp.GetPointer(), resp.GetPointer().GetRevision(), resp.GetSnapshot())
		if err != nil {
			l.logger.ErrorContext(ctx, "discovery sent an inconsistent snapshot; skipped", "error", err)
			continue
		}
		if err := l.applyUpdate(ctx, up); err != nil {
			return 0, err
		}
	}
	return 0, l.store.ResetDiscoveryCursor(ctx, 0)
}

// InconsistentError is a snapshot that contradicts its pointer or itself
// (a descriptor digest that is not the digest of its raw JSON, a tool id
// that is not `<server>.<name>`). Such a snapshot is never applied.
type InconsistentError struct {
	Pair   store.Pair
	Reason string
}

func (e *InconsistentError) Error() string {
	return fmt.Sprintf("snapshot of %s/%s: %s", e.Pair.ServerID, e.Pair.AudienceClass, e.Reason)
}

// pointerUpdate turns a pointer and its snapshot into a store update,
// checking that the snapshot is the pointer's and that every descriptor
// digest is the digest of its raw JSON.
func pointerUpdate(p *discoveryv1.ActivePointer, rev int64, snap *catalogv1.Snapshot) (store.PointerUpdate, error) {
	pair := store.Pair{ServerID: p.GetServerId(), AudienceClass: p.GetAudienceClass()}
	up := store.PointerUpdate{ServerID: pair.ServerID, AudienceClass: pair.AudienceClass, Revision: rev, Generation: p.GetGeneration()}
	if p.GetState() == discoveryv1.PointerState_POINTER_STATE_CLOSED || snap == nil {
		up.Closed = true
		return up, nil
	}
	bad := func(format string, args ...any) (store.PointerUpdate, error) {
		return store.PointerUpdate{}, &InconsistentError{Pair: pair, Reason: fmt.Sprintf(format, args...)}
	}
	if snap.GetServerId() != pair.ServerID || snap.GetAudienceClass() != pair.AudienceClass {
		return bad("snapshot is of %s/%s", snap.GetServerId(), snap.GetAudienceClass())
	}
	if g := snap.GetGeneration(); g != 0 && g != up.Generation {
		return bad("snapshot is generation %d, the pointer names %d", g, up.Generation)
	}
	up.SnapshotDigest = snap.GetSnapshotDigest()
	seen := map[string]bool{}
	for _, t := range snap.GetTools() {
		name := t.GetName()
		if id := ids.ToolID(pair.ServerID, name); name == "" || (t.GetToolId() != "" && t.GetToolId() != id) {
			return bad("tool %q has id %q", name, t.GetToolId())
		}
		if _, _, ok := ids.SplitToolID(ids.ToolID(pair.ServerID, name)); !ok {
			return bad("tool name %q breaks the MCP name rules", name)
		}
		if seen[name] {
			return bad("tool %q is listed twice", name)
		}
		seen[name] = true
		d, err := canonical.Digest(t.GetRaw())
		if err != nil || d != t.GetDescriptorDigest() {
			return bad("descriptor digest of %q is not the digest of its raw JSON", name)
		}
		up.Tools = append(up.Tools, store.SourceTool{Name: name, DescriptorDigest: d, Raw: t.GetRaw()})
	}
	return up, nil
}

var _ Store = (*store.Store)(nil)
