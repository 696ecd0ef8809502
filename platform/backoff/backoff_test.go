package backoff

import (
	"context"
	"testing"
	"time"
)

// TestWaitsDoubleUpToTheCapWithJitter: every wait is between half and all
// of its step; the steps are 100, 200, 400, 800 ms, then the 1 s cap for
// ever; waits of one step are spread (not one value); Reset starts over.
func TestWaitsDoubleUpToTheCapWithJitter(t *testing.T) {
	const first, limit = 100 * time.Millisecond, time.Second
	steps := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000, 1000}
	seen := map[int]map[time.Duration]bool{}
	for round := range 200 {
		b := New(first, limit)
		if round%2 == 1 {
			for range 5 {
				b.Next()
			}
			b.Reset() // must behave as new
		}
		for i, s := range steps {
			step := s * time.Millisecond
			d := b.Next()
			if d < step/2 || d > step {
				t.Fatalf("wait %d: %v, want within [%v, %v]", i, d, step/2, step)
			}
			if d > limit {
				t.Fatalf("wait %d: %v over the cap %v", i, d, limit)
			}
			if seen[i] == nil {
				seen[i] = map[time.Duration]bool{}
			}
			seen[i][d] = true
		}
	}
	for i := range steps {
		if len(seen[i]) < 50 {
			t.Fatalf("wait %d took only %d distinct values in 200 rounds: no jitter", i, len(seen[i]))
		}
	}
}

func TestNewFixesBadBounds(t *testing.T) {
	b := New(0, -1)
	for range 5 {
		if d := b.Next(); d > time.Millisecond {
			t.Fatalf("wait %v with first 0 and max below it", d)
		}
	}
	b = New(time.Second, time.Millisecond)
	if d := b.Next(); d > time.Second || d < 500*time.Millisecond {
		t.Fatalf("wait %v with max below first", d)
	}
}

func TestWaitStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Wait(ctx, time.Minute) {
		t.Fatal("Wait reported a full wait on a cancelled context")
	}
	if time.Since(start) > time.Second {
		t.Fatal("Wait did not return at once")
	}
	if !Wait(context.Background(), time.Millisecond) {
		t.Fatal("a 1 ms wait reported as cut short")
	}
}
