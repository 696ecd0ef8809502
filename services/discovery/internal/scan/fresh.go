package scan

import (
	"context"
	"sync"
	"time"
)

// fresh shares registry reads between concurrent scans without ever
// serving a read older than the caller allows: get(after) returns the result
// of a fetch that started at or after `after`, joining one in flight when
// there is such a fetch and starting one otherwise. A scan asks for reads
// started after it started (and, before the commit, after its crawl ended),
// so sharing never weakens a "re-read" check; it only stops concurrent
// triggers and listeners from fetching the same audience class many times.
// (A scan reads its server, binding and epoch with one narrow
// [registryclient.Registry.Binding] call instead.)
type fresh[T any] struct {
	mu sync.Mutex
	m  map[string]*freshEntry[T]
}

type freshEntry[T any] struct {
	started time.Time
	done    chan struct{}
	v       T
	err     error
}

func (f *fresh[T]) get(ctx context.Context, key string, after time.Time, fetch func(context.Context) (T, error)) (T, error) {
	f.mu.Lock()
	if f.m == nil {
		f.m = map[string]*freshEntry[T]{}
	}
	e := f.m[key]
	if e == nil || e.started.Before(after) {
		e = &freshEntry[T]{started: time.Now(), done: make(chan struct{})}
		f.m[key] = e
		f.mu.Unlock()
		// The fetch runs on its own context: other scans may be waiting.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		e.v, e.err = fetch(fctx)
		cancel()
		close(e.done)
		return e.v, e.err
	}
	f.mu.Unlock()
	select {
	case <-e.done:
		return e.v, e.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// recent returns the result of the last fetch of key when it succeeded and
// started at most maxAge ago, without fetching; a fetch still in flight
// that started within maxAge is waited for (until ctx ends), so triggers
// arriving together share one read instead of each starting its own. It
// serves answers that a later fresh read confirms anyway (see
// [Scanner.Trigger]).
func (f *fresh[T]) recent(ctx context.Context, key string, maxAge time.Duration) (T, bool) {
	f.mu.Lock()
	e := f.m[key]
	f.mu.Unlock()
	var zero T
	if e == nil || time.Since(e.started) > maxAge {
		return zero, false
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return zero, false
	}
	if e.err != nil {
		return zero, false
	}
	return e.v, true
}
