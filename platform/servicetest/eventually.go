package servicetest

import (
	"testing"
	"time"
)

// Eventually waits until cond holds, polling it, and fails the test naming
// what when it still does not hold after within. Use it instead of
// sleeping and then asserting: a test that waits on a condition is as fast
// as the system and fails only when the bound, chosen for what the test
// protects (e.g. 1 s for revocation on a connected replica, DESIGN I8), is
// really missed.
//
// cond is polled every within/50, between 5 ms and 50 ms.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(within, cond) {
		t.Fatalf("%s: not within %v", what, within)
	}
}

// poll reports whether cond held within the bound.
func poll(within time.Duration, cond func() bool) bool {
	every := min(max(within/50, 5*time.Millisecond), 50*time.Millisecond)
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}
