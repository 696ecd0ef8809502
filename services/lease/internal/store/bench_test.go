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
