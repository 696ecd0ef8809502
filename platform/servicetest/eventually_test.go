package servicetest

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestEventuallyWaitsForTheCondition: it returns as soon as the condition
// holds (well before the bound), and polls a condition that never holds
// until the bound, then reports it missed.
func TestEventuallyWaitsForTheCondition(t *testing.T) {
	var n atomic.Int32
	start := time.Now()
	Eventually(t, 10*time.Second, "the third poll", func() bool { return n.Add(1) >= 3 })
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v for a condition true at the third poll", d)
	}
	if n.Load() != 3 {
		t.Fatalf("polled %d times, want 3", n.Load())
	}

	var polls atomic.Int32
	start = time.Now()
	if poll(100*time.Millisecond, func() bool { polls.Add(1); return false }) {
		t.Fatal("a condition that never holds was reported as held")
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("gave up after %v, before the 100ms bound", d)
	}
	if polls.Load() < 2 {
		t.Fatalf("polled %d times within the bound", polls.Load())
	}
}
