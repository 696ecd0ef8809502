package changelog

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Feed is what a Watch server reads: the PostgreSQL [Log] of a service, or
// a [Memory] log in a test's fake. Both are served by the same [Watch] and
// [Server], so a fake cannot disagree with the service it stands for.
type Feed interface {
	// Head returns the newest committed revision; 0 when none.
	Head(ctx context.Context) (int64, error)
	// Oldest returns the revision of the oldest change still kept; head+1
	// when none is kept.
	Oldest(ctx context.Context) (int64, error)
	// Read returns up to limit entries with revision > after, in order;
	// [ErrCompacted] when some of them are no longer kept.
	Read(ctx context.Context, after int64, limit int) ([]Entry, error)
	// Notify returns a channel that receives when new changes may have
	// committed, and a function that stops it.
	Notify() (<-chan struct{}, func())
}

var (
	_ Feed = (*Log)(nil)
	_ Feed = (*Memory)(nil)
)

// Event is what a watcher receives: an entry, or a heartbeat when Entry is
// nil.
type Event struct {
	// Entry is the change; nil for a heartbeat.
	Entry *Entry
	// Head is, for a heartbeat, the newest revision; every change up to it
	// has been delivered.
	Head int64
	// SentAt is when a heartbeat was made.
	SentAt time.Time
}

// readBatch is how many entries one Read returns.
const readBatch = 500

// Watch delivers every entry of feed after `from` in order, then each new
// one as it commits, until ctx ends or send fails. Heartbeats: one as soon
// as every entry up to the head at the start was sent, then one every
// interval, each carrying the head (every change up to it was sent). It
// returns [ErrCompacted] when `from` (or, for a slow watcher, its position)
// is no longer kept and [ErrAhead] when `from` is past the head.
func Watch(ctx context.Context, feed Feed, from int64, heartbeat time.Duration, send func(Event) error) error {
	wake, stop := feed.Notify()
	defer stop()
	ticker := time.NewTicker(heartbeat)
	defer ticker.Stop()
	head, err := feed.Head(ctx)
	if err != nil {
		return err
	}
	if from > head {
		return fmt.Errorf("%w: asked for changes after %d, head is %d", ErrAhead, from, head)
	}
	cursor := from
	drain := func() error {
		for {
			entries, err := feed.Read(ctx, cursor, readBatch)
			if err != nil {
				return err
			}
			for i := range entries {
				if err := send(Event{Entry: &entries[i]}); err != nil {
					return err
				}
				cursor = entries[i].Revision
			}
			if len(entries) < readBatch {
				return nil
			}
		}
	}
	beat := func() error {
		head, err := feed.Head(ctx)
		if err != nil {
			return err
		}
		if head > cursor {
			if err := drain(); err != nil {
				return err
			}
		}
		// cursor >= head now: everything up to head was sent.
		return send(Event{Head: max(head, cursor), SentAt: time.Now()})
	}
	if err := drain(); err != nil {
		return err
	}
	if err := beat(); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
			if err := drain(); err != nil {
				return err
			}
		case <-ticker.C:
			if err := beat(); err != nil {
				return err
			}
		}
	}
}

// Watch is [Watch] on l.
func (l *Log) Watch(ctx context.Context, from int64, heartbeat time.Duration, send func(Event) error) error {
	return Watch(ctx, l, from, heartbeat, send)
}

// Memory is an in-memory change log for the fakes tests use in place of a
// service: the same [Feed] contract as [Log], without PostgreSQL. Serve it
// with a [Server] like the real service does.
type Memory struct {
	mu      sync.Mutex
	entries []Entry // kept entries, in revision order
	head    int64
	held    int64 // when > 0, entries after it are hidden (see Hold)
	waiters map[chan struct{}]struct{}
}

// NewMemory returns an empty log.
func NewMemory() *Memory { return &Memory{waiters: map[chan struct{}]struct{}{}} }

// Append records a change and returns it with its revision.
func (m *Memory) Append(kind string, payload []byte, tenants []string) Entry {
	m.mu.Lock()
	m.head++
	e := Entry{Revision: m.head, CommittedAt: time.Now(), Kind: kind, Payload: slices.Clone(payload), Tenants: slices.Clone(tenants)}
	m.entries = append(m.entries, e)
	m.mu.Unlock()
	m.wake()
	return e
}

// Compact forgets every entry up to and including revision through.
func (m *Memory) Compact(through int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries = slices.DeleteFunc(m.entries, func(e Entry) bool { return e.Revision <= through })
}

// Hold hides the changes appended from now on, as if their commits were
// delayed, until [Memory.Release]: heartbeats report only what is visible.
func (m *Memory) Hold() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == 0 {
		m.held = m.head
	}
}

// Release shows the changes hidden by [Memory.Hold].
func (m *Memory) Release() {
	m.mu.Lock()
	m.held = 0
	m.mu.Unlock()
	m.wake()
}

func (m *Memory) visibleHead() int64 {
	if m.held > 0 {
		return m.held
	}
	return m.head
}

// Head implements [Feed].
func (m *Memory) Head(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.visibleHead(), nil
}

// Oldest implements [Feed].
func (m *Memory) Oldest(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.entries) == 0 || m.entries[0].Revision > m.visibleHead() {
		return m.visibleHead() + 1, nil
	}
	return m.entries[0].Revision, nil
}

// Read implements [Feed].
func (m *Memory) Read(_ context.Context, after int64, limit int) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	head := m.visibleHead()
	if after >= head {
		return nil, nil
	}
	i, _ := slices.BinarySearchFunc(m.entries, after+1, func(e Entry, rev int64) int { return int(e.Revision - rev) })
	if i == len(m.entries) || m.entries[i].Revision != after+1 {
		return nil, fmt.Errorf("%w: asked for changes after %d, they are no longer kept", ErrCompacted, after)
	}
	var out []Entry
	for _, e := range m.entries[i:] {
		if e.Revision > head || len(out) == limit {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// Notify implements [Feed].
func (m *Memory) Notify() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.waiters[ch] = struct{}{}
	m.mu.Unlock()
	return ch, func() {
		m.mu.Lock()
		delete(m.waiters, ch)
		m.mu.Unlock()
	}
}

func (m *Memory) wake() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for ch := range m.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
