package changelog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/toolcrib/toolcrib/platform/backoff"
)

// ErrDraining is returned by a [Stream] whose server ended it because it is
// shutting down (UNAVAILABLE [ReasonDraining]); a follower reconnects.
var ErrDraining = errors.New("changelog: the server is draining")

// Message is one message of a Watch stream as a [Follower] reads it.
type Message[C any] struct {
	// Change is the change; the zero C for a heartbeat.
	Change C
	// Revision is the change's revision, or the heartbeat's head: every
	// change up to it that the stream may carry was sent.
	Revision int64
	// Heartbeat is true for a heartbeat.
	Heartbeat bool
}

// Stream is one open Watch stream.
type Stream[C any] interface {
	// Recv returns the next message. Errors wrap [ErrCompacted],
	// [ErrAhead] or [ErrDraining] when the server said so; any other error
	// (io.EOF included) is a broken stream.
	Recv() (Message[C], error)
}

// Source opens Watch streams of one service: the consumer-side interface a
// follower needs, implemented for the registry by [RegistrySource] and for
// discovery by [DiscoverySource].
type Source[C any] interface {
	// Watch opens a stream of the changes after from (0: every change still
	// kept). It ends when ctx ends.
	Watch(ctx context.Context, from int64) (Stream[C], error)
}

// FollowerConfig configures a [Follower].
type FollowerConfig[C any] struct {
	// Name names the stream in logs, e.g. "registry".
	Name string
	// Source opens the streams.
	Source Source[C]
	// List reads the current state, replacing whatever the consumer holds,
	// and returns the revision it reflects: every change up to it is in
	// what was read (a list response's revision). The follower watches from
	// it. Called at start (unless Resume has a revision) and after
	// [ErrCompacted] or [ErrAhead].
	List func(ctx context.Context) (int64, error)
	// Apply applies one change, in revision order, each exactly once per
	// stream. An error ends the stream; the follower reconnects from the
	// last change applied.
	Apply func(ctx context.Context, rev int64, change C) error
	// Resume, when set, returns a revision stored by the consumer to watch
	// from instead of listing at start; ok is false when there is none.
	Resume func(ctx context.Context) (rev int64, ok bool, err error)
	// Advance, when set, is called when a heartbeat moves the follower past
	// the last change applied (e.g. to store a durable cursor). An error
	// ends the stream like an Apply error.
	Advance func(ctx context.Context, rev int64) error
	// MinBackoff and MaxBackoff bound the wait between failed attempts
	// (exponential with jitter); defaults 200 ms and 10 s.
	MinBackoff, MaxBackoff time.Duration
	// StallTimeout is how long a stream may stay silent (no change, no
	// heartbeat) before the follower drops it and reconnects; default 10 s.
	// Set it to a few heartbeat intervals.
	StallTimeout time.Duration
	// Logger receives state changes (connected, resynced, failing); nil
	// discards them.
	Logger *slog.Logger
}

// Freshness is how far a follower is: "fresh up to revision R as of time
// T". Every change up to Revision has been applied; the newest heartbeat,
// received at At (local clock), said the source's head was
// HeartbeatRevision, so as of At the consumer held every change it may see
// up to HeartbeatRevision. A filtered (tenant) stream skips revisions of
// other tenants; its heartbeats still carry the head, so At is what proves
// freshness, not the revisions of the changes received.
type Freshness struct {
	// Revision is the newest revision applied (listed, changed or
	// confirmed by a heartbeat).
	Revision int64
	// HeartbeatRevision is the revision of the newest heartbeat.
	HeartbeatRevision int64
	// At is when the newest heartbeat arrived; zero before the first.
	At time.Time
	// Connected is true while a stream is open.
	Connected bool
	// Lists counts the (re)lists so far.
	Lists int
}

// Fresh reports whether a heartbeat arrived less than window before now:
// a heartbeat exactly one window old is stale (fail closed). A replica
// answers from its state only while this holds (I8). It is the one
// freshness comparison; [Heads] uses it.
func (f Freshness) Fresh(now time.Time, window time.Duration) bool {
	return !f.At.IsZero() && now.Before(f.At.Add(window))
}

// Follower follows one Watch stream into a consumer: list, watch from the
// listed revision, resume after a broken stream with exponential backoff
// and jitter, re-list after [ErrCompacted] or [ErrAhead], and record
// [Freshness] from heartbeats. Admission and lease replicas follow both
// services' streams with it; so do the registry's discovery intake
// and discovery's watch of the registry.
type Follower[C any] struct {
	cfg FollowerConfig[C]
	log *slog.Logger

	mu      sync.Mutex
	fresh   Freshness
	changed chan struct{} // closed and replaced on every update of fresh
}

// NewFollower returns a follower; start it with [Follower.Run].
func NewFollower[C any](cfg FollowerConfig[C]) *Follower[C] {
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 200 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(10*time.Second, cfg.MinBackoff)
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Follower[C]{cfg: cfg, log: log.With("stream", cfg.Name), changed: make(chan struct{})}
}

// Freshness returns how far the follower is now.
func (f *Follower[C]) Freshness() Freshness {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fresh
}

// WaitCaughtUp blocks until a heartbeat arrives that was received after
// the call (the consumer then held every change up to the source's head at
// some moment after the call) and returns the freshness then; ctx's error
// if it ends first. Health checks use it to turn SERVING once caught up.
func (f *Follower[C]) WaitCaughtUp(ctx context.Context) (Freshness, error) {
	since := time.Now()
	return f.wait(ctx, func(fr Freshness) bool { return !fr.At.Before(since) })
}

// WaitRevision blocks until every change up to rev has been applied (e.g.
// a revision a write returned); ctx's error if it ends first.
func (f *Follower[C]) WaitRevision(ctx context.Context, rev int64) (Freshness, error) {
	return f.wait(ctx, func(fr Freshness) bool { return fr.Revision >= rev })
}

func (f *Follower[C]) wait(ctx context.Context, done func(Freshness) bool) (Freshness, error) {
	for {
		f.mu.Lock()
		fr, ch := f.fresh, f.changed
		f.mu.Unlock()
		if done(fr) {
			return fr, nil
		}
		select {
		case <-ctx.Done():
			return fr, ctx.Err()
		case <-ch:
		}
	}
}

func (f *Follower[C]) update(fn func(*Freshness)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.fresh)
	close(f.changed)
	f.changed = make(chan struct{})
}

// Run follows the source until ctx ends, then returns nil. It never gives
// up: failures are logged and retried with backoff.
func (f *Follower[C]) Run(ctx context.Context) error {
	retry := backoff.New(f.cfg.MinBackoff, f.cfg.MaxBackoff)
	var cursor int64
	needList := true
	if f.cfg.Resume != nil {
		for ctx.Err() == nil {
			rev, ok, err := f.cfg.Resume(ctx)
			if err == nil {
				cursor, needList = rev, !ok
				f.update(func(fr *Freshness) { fr.Revision = rev })
				break
			}
			f.log.WarnContext(ctx, "reading the stored revision failed; retrying", "error", err)
			backoff.Wait(ctx, retry.Next())
		}
	}
	for ctx.Err() == nil {
		if needList {
			rev, err := f.cfg.List(ctx)
			if err != nil {
				if ctx.Err() == nil {
					d := retry.Next()
					f.log.WarnContext(ctx, "listing failed; retrying", "error", err, "retry_in", d)
					backoff.Wait(ctx, d)
				}
				continue
			}
			cursor, needList = rev, false
			f.update(func(fr *Freshness) { fr.Revision = rev; fr.Lists++ })
			f.log.InfoContext(ctx, "listed", "revision", rev)
		}
		progressed, err := f.follow(ctx, &cursor)
		if ctx.Err() != nil {
			break
		}
		if progressed {
			retry.Reset()
		}
		d := retry.Next()
		switch {
		case errors.Is(err, ErrCompacted), errors.Is(err, ErrAhead):
			f.log.WarnContext(ctx, "the source no longer serves the follower's revision; re-listing", "revision", cursor, "error", err)
			needList = true
			if progressed {
				retry.Reset() // the wait drawn above is not taken
				continue      // re-list at once; a loop of lists still backs off below
			}
		case errors.Is(err, ErrDraining):
			f.log.InfoContext(ctx, "the source is draining; reconnecting", "revision", cursor)
		default:
			f.log.WarnContext(ctx, "the stream broke; reconnecting", "revision", cursor, "error", err, "retry_in", d)
		}
		backoff.Wait(ctx, d)
	}
	return nil
}

// errStalled is a stream silent for longer than the stall timeout.
var errStalled = errors.New("changelog: the stream stalled (no heartbeat)")

// follow runs one stream from *cursor until it fails. progressed reports
// whether a heartbeat arrived (the stream reached the head).
func (f *Follower[C]) follow(ctx context.Context, cursor *int64) (progressed bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(f.cfg.StallTimeout, func() { cancel(errStalled) })
	defer stall.Stop()
	stream, err := f.cfg.Source.Watch(ctx, *cursor)
	if err != nil {
		return false, f.cause(ctx, err)
	}
	f.update(func(fr *Freshness) { fr.Connected = true })
	defer f.update(func(fr *Freshness) { fr.Connected = false })
	f.log.DebugContext(ctx, "watching", "from_revision", *cursor)
	for {
		msg, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: the stream ended", io.ErrUnexpectedEOF)
			}
			return progressed, f.cause(ctx, err)
		}
		stall.Reset(f.cfg.StallTimeout)
		if msg.Heartbeat {
			now := time.Now()
			if msg.Revision > *cursor && f.cfg.Advance != nil {
				if err := f.cfg.Advance(ctx, msg.Revision); err != nil {
					return progressed, f.cause(ctx, err)
				}
			}
			*cursor = max(*cursor, msg.Revision)
			progressed = true
			rev := *cursor
			f.update(func(fr *Freshness) { fr.Revision, fr.HeartbeatRevision, fr.At = rev, msg.Revision, now })
			continue
		}
		if msg.Revision <= *cursor {
			continue // already applied (listed)
		}
		if err := f.cfg.Apply(ctx, msg.Revision, msg.Change); err != nil {
			return progressed, f.cause(ctx, err)
		}
		*cursor = msg.Revision
		rev := *cursor
		f.update(func(fr *Freshness) { fr.Revision = rev })
	}
}

// cause prefers the reason the stream's context was cancelled (a stall)
// over the error it produced.
func (f *Follower[C]) cause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && errors.Is(c, errStalled) {
		return c
	}
	return err
}
