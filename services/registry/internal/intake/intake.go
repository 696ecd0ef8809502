package intake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/services/registry/internal/contract"
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

// Loop follows discovery's Watch into the store.
type Loop struct {
	client discoveryv1.DiscoveryServiceClient
	store  Store
	logger *slog.Logger

	// MinBackoff and MaxBackoff bound the wait between failed attempts.
	MinBackoff, MaxBackoff time.Duration
	// WarnEvery spaces the warnings about repeated failures.
	WarnEvery time.Duration
}

// New returns a loop reading from client into st.
func New(client discoveryv1.DiscoveryServiceClient, st Store, logger *slog.Logger) *Loop {
	return &Loop{client: client, store: st, logger: logger,
		MinBackoff: 200 * time.Millisecond, MaxBackoff: 10 * time.Second, WarnEvery: time.Minute}
}

// errStreamEnded is a Watch stream that ended without an error (discovery
// drained); the loop reconnects.
var errStreamEnded = errors.New("discovery ended the watch stream")

// Run follows discovery until ctx ends; it always returns nil then.
func (l *Loop) Run(ctx context.Context) error {
	l.waitForStore(ctx)
	backoff := l.MinBackoff
	var lastWarn time.Time
	for ctx.Err() == nil {
		progressed, err := l.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if compacted(err) {
			l.logger.WarnContext(ctx, "discovery no longer keeps the moves after the registry's cursor; re-reading every active pointer", "error", err)
			if err = l.resync(ctx); err == nil {
				backoff = l.MinBackoff
				continue
			}
		}
		if progressed {
			backoff = l.MinBackoff
		}
		level := slog.LevelDebug
		if !errors.Is(err, errStreamEnded) && time.Since(lastWarn) >= l.WarnEvery {
			level, lastWarn = slog.LevelWarn, time.Now()
		}
		l.logger.Log(ctx, level, "following discovery failed; retrying", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, l.MaxBackoff)
	}
	return nil
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

// follow watches from the stored cursor and applies every move until the
// stream fails. progressed reports whether anything arrived.
func (l *Loop) follow(ctx context.Context) (progressed bool, err error) {
	cursor, err := l.store.DiscoveryCursor(ctx)
	if err != nil {
		return false, fmt.Errorf("read cursor: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := l.client.Watch(ctx, &discoveryv1.WatchRequest{FromRevision: cursor})
	if err != nil {
		return false, err
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return progressed, errStreamEnded
		}
		if err != nil {
			return progressed, err
		}
		switch ev := msg.GetEvent().(type) {
		case *discoveryv1.WatchResponse_Change:
			if err := l.apply(ctx, ev.Change); err != nil {
				return progressed, err
			}
			cursor = max(cursor, ev.Change.GetRevision())
		case *discoveryv1.WatchResponse_Heartbeat:
			// Every move up to the heartbeat's revision was sent and applied.
			if rev := ev.Heartbeat.GetRevision(); rev > cursor {
				if err := l.store.AdvanceDiscoveryCursor(ctx, rev); err != nil {
					return progressed, err
				}
				cursor = rev
			}
		}
		progressed = true
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

// resync re-reads the active pointer of every known pair, applies each,
// and sets the cursor to 0 so the next watch replays every move discovery
// still keeps (skipped per pair when not newer).
func (l *Loop) resync(ctx context.Context) error {
	pairs, err := l.store.SourcePairs(ctx)
	if err != nil {
		return err
	}
	for _, pair := range pairs {
		resp, err := l.client.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{
			ServerId: pair.ServerID, AudienceClass: pair.AudienceClass})
		if status.Code(err) == codes.NotFound {
			continue // never committed
		}
		if err != nil {
			return fmt.Errorf("active snapshot of %s/%s: %w", pair.ServerID, pair.AudienceClass, err)
		}
		up, err := pointerUpdate(resp.GetPointer(), resp.GetPointer().GetRevision(), resp.GetSnapshot())
		if err != nil {
			l.logger.ErrorContext(ctx, "discovery sent an inconsistent snapshot; skipped", "error", err)
			continue
		}
		if err := l.applyUpdate(ctx, up); err != nil {
			return err
		}
	}
	return l.store.ResetDiscoveryCursor(ctx, 0)
}

// compacted reports whether err is discovery's REVISION_COMPACTED.
func compacted(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "REVISION_COMPACTED" {
			return true
		}
	}
	return false
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
		if id := contract.ToolID(pair.ServerID, name); name == "" || (t.GetToolId() != "" && t.GetToolId() != id) {
			return bad("tool %q has id %q", name, t.GetToolId())
		}
		if _, _, ok := contract.SplitToolID(contract.ToolID(pair.ServerID, name)); !ok {
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
