package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is one loop's retry delay. The zero value is not usable; use
// [New]. Not safe for concurrent use: one per loop.
type Backoff struct {
	min, max time.Duration
	step     time.Duration
}

// New returns a backoff whose first wait is at most first and whose waits
// never exceed max. first must be positive; a max below first is first.
func New(first, max time.Duration) *Backoff {
	if first <= 0 {
		first = time.Millisecond
	}
	if max < first {
		max = first
	}
	return &Backoff{min: first, max: max, step: first}
}

// Next returns the next wait, uniformly between half and all of the
// current step, and doubles the step up to the cap.
func (b *Backoff) Next() time.Duration {
	d := b.step/2 + rand.N(b.step-b.step/2+1)
	b.step = min(2*b.step, b.max)
	return d
}

// Reset starts over from the first step, after a success.
func (b *Backoff) Reset() { b.step = b.min }

// Wait sleeps d (a value from [Backoff.Next]) and reports true, or
// returns false as soon as ctx ends.
func Wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
