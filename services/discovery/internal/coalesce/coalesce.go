// Package coalesce sends calls made at the same moment as one batch: a
// fleet's scans read the registry, pin identities and queue jobs at the
// same time, and one call for many costs one round trip (and, for writes,
// one transaction) instead of many.
package coalesce

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// ErrShortAnswer is the error of every call of a batch whose send returned
// fewer or more answers than calls.
var ErrShortAnswer = fmt.Errorf("coalesce: a batch's answers do not match its calls")

// Coalescer queues calls of type Q and sends those waiting together with
// Send, which returns one answer per call, in order. The calls queued while
// earlier batches are being sent form the next batch (at most Max calls; at
// most InFlight batches at once). Send runs on a context of its own (with
// Timeout), so one caller's cancellation never fails the others' calls.
// The zero value is not usable: set Send, Max, InFlight and Timeout.
type Coalescer[Q, R any] struct {
	Send     func(ctx context.Context, qs []Q) ([]R, error)
	Max      int
	InFlight int
	Timeout  time.Duration

	mu      sync.Mutex
	queue   []*pending[Q, R]
	running int
}

type pending[Q, R any] struct {
	ctx  context.Context
	q    Q
	r    R
	err  error
	done chan struct{}
}

// Do queues q and returns its answer, or ctx's error if ctx ends first
// (a batch may still carry q then). A call whose context ended before its
// batch was sent is left out of it.
func (c *Coalescer[Q, R]) Do(ctx context.Context, q Q) (R, error) {
	p := &pending[Q, R]{ctx: ctx, q: q, done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, p)
	start := c.running < max(c.InFlight, 1)
	if start {
		c.running++
	}
	c.mu.Unlock()
	if start {
		go c.loop()
	}
	select {
	case <-p.done:
		return p.r, p.err
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// loop sends batches while calls wait.
func (c *Coalescer[Q, R]) loop() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running--
			c.mu.Unlock()
			return
		}
		n := min(len(c.queue), max(c.Max, 1))
		batch := make([]*pending[Q, R], 0, n)
		for _, p := range c.queue[:n] {
			if p.ctx.Err() == nil {
				batch = append(batch, p)
			}
		}
		c.queue = append(c.queue[:0], c.queue[n:]...)
		c.mu.Unlock()
		if len(batch) > 0 {
			c.run(batch)
		}
	}
}

func (c *Coalescer[Q, R]) run(batch []*pending[Q, R]) {
	defer func() {
		for _, p := range batch {
			close(p.done)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	qs := make([]Q, len(batch))
	for i, p := range batch {
		qs[i] = p.q
	}
	rs, err := c.Send(ctx, qs)
	if err == nil && len(rs) != len(qs) {
		err = fmt.Errorf("%w: %d answers to %d calls", ErrShortAnswer, len(rs), len(qs))
	}
	for i, p := range batch {
		if err != nil {
			p.err = err
			continue
		}
		p.r = rs[i]
	}
}
