package store_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/services/lease/internal/store"
)

// BenchmarkRecordIssue commits execution receipts from 16 concurrent
// callers through the group commit, as Issue does in bench-lease.
func BenchmarkRecordIssue(b *testing.B) {
	s := newStore(b)
	if _, _, err := s.Freeze(context.Background(), "inv", false, "", "ops"); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	now := time.Now()
	b.SetParallelism(8) // 16 callers on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.RecordIssue(context.Background(), store.Issued{Claims: claims("l"+strconv.FormatInt(n.Add(1), 10), now), KeyID: "k"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRecordIssueAlone commits one execution receipt at a time, as
// Issue does with one call in flight (bench-gateway): the caller writes
// its own batch, so what it measures over the statement's round trip is
// the store's own cost.
func BenchmarkRecordIssueAlone(b *testing.B) {
	s := newStore(b)
	ctx := context.Background()
	now := time.Now()
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.RecordIssue(ctx, store.Issued{Claims: claims("a"+strconv.Itoa(i), now), KeyID: "k"}); err != nil {
			b.Fatal(err)
		}
	}
}
