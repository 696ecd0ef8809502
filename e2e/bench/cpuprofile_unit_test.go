package bench

import (
	"bytes"
	"context"
	"runtime/pprof"
	"testing"
	"time"
)

// TestLabelledCPU: the decoder finds the CPU of labelled work in a real
// profile, and only that: a labelled spin of ~300 ms beside an unlabelled
// one of the same length is about half the total.
func TestLabelledCPU(t *testing.T) {
	spin := func(d time.Duration) {
		x := 0
		for end := time.Now().Add(d); time.Now().Before(end); x++ {
		}
		_ = x
	}
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Skipf("a CPU profile is already running: %v", err)
	}
	pprof.Do(context.Background(), pprof.Labels(benchLabel, "spun"), func(ctx context.Context) {
		spin(200 * time.Millisecond)
		pprof.Do(ctx, pprof.Labels("step", "inner"), func(context.Context) { spin(100 * time.Millisecond) })
	})
	spin(300 * time.Millisecond)
	pprof.StopCPUProfile()
	labelled, total, err := labelledCPU(buf.Bytes(), "spun")
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 || labelled == 0 {
		t.Fatalf("labelled %d ns of %d ns", labelled, total)
	}
	if share := float64(labelled) / float64(total); share < 0.1 || share > 0.9 {
		t.Fatalf("labelled share %.2f of %d ns, want about half", share, total)
	}
	// The inner step is part of the labelled work and about a third of it.
	by, err := labelledCPUBy(buf.Bytes(), "spun", "step")
	if err != nil {
		t.Fatal(err)
	}
	if by["inner"]+by[""] != labelled || by["inner"] == 0 || by[""] == 0 {
		t.Fatalf("by step %v, labelled %d ns", by, labelled)
	}
	if share := float64(by["inner"]) / float64(labelled); share < 0.1 || share > 0.6 {
		t.Fatalf("inner share %.2f of %d ns, want about a third", share, labelled)
	}
	none, _, err := labelledCPU(buf.Bytes(), "other")
	if err != nil || none != 0 {
		t.Fatalf("a label nobody set: %d ns, %v", none, err)
	}
	if _, _, err := labelledCPU([]byte("not a profile"), "spun"); err == nil {
		t.Fatal("garbage decoded")
	}
}
