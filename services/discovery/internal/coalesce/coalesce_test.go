package coalesce

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestCallsWaitingTogetherShareOneBatch: calls queued while a batch is on
// the wire go together in the next one, each gets its own answer, and a
// batch never carries more than Max calls.
func TestCallsWaitingTogetherShareOneBatch(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	c := &Coalescer[int, int]{Max: 8, InFlight: 1, Timeout: time.Minute, Send: func(_ context.Context, qs []int) ([]int, error) {
		mu.Lock()
		sizes = append(sizes, len(qs))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-release // hold the first batch on the wire while the others queue
		}
		out := make([]int, len(qs))
		for i, q := range qs {
			out[i] = q * 10
		}
		return out, nil
	}}
	var wg sync.WaitGroup
	call := func(q int) {
		defer wg.Done()
		r, err := c.Do(context.Background(), q)
		if err != nil || r != q*10 {
			t.Errorf("Do(%d) = %d, %v", q, r, err)
		}
	}
	wg.Add(1)
	go call(0)
	for {
		mu.Lock()
		n := len(sizes)
		mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for q := 1; q <= 12; q++ {
		wg.Add(1)
		go call(q)
	}
	for { // every call queued behind the first batch
		c.mu.Lock()
		n := len(c.queue)
		c.mu.Unlock()
		if n == 12 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if len(sizes) != 3 || sizes[0] != 1 || sizes[1] != 8 || sizes[2] != 4 {
		t.Fatalf("batch sizes %v, want [1 8 4]", sizes)
	}
}

// TestFailedBatchFailsEachCallAndCancelledCallsStayOut: Send's error is
// every call's error; a call whose context ended before its batch left is
// not sent; a short answer fails the batch.
func TestFailedBatchFailsEachCallAndCancelledCallsStayOut(t *testing.T) {
	boom := errors.New("boom")
	var sent [][]string
	c := &Coalescer[string, string]{Max: 4, InFlight: 1, Timeout: time.Minute, Send: func(_ context.Context, qs []string) ([]string, error) {
		sent = append(sent, qs)
		if qs[0] == "fail" {
			return nil, boom
		}
		return qs[:len(qs)-1], nil // one answer short
	}}
	if _, err := c.Do(context.Background(), "fail"); !errors.Is(err, boom) {
		t.Fatalf("failed batch: %v", err)
	}
	if _, err := c.Do(context.Background(), "short"); !errors.Is(err, ErrShortAnswer) {
		t.Fatalf("short answer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Do(ctx, "gone"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	time.Sleep(10 * time.Millisecond)
	for _, b := range sent {
		for _, q := range b {
			if q == "gone" {
				t.Fatalf("a cancelled call was sent: %v", sent)
			}
		}
	}
}
