package ledger

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/redistest"
)

// BenchmarkConsume consumes fresh lease ids from 16 concurrent callers
// (as Verify in bench-lease): through the ledger's shared pipelines, and,
// for comparison, one SET NX roundtrip per call.
func BenchmarkConsume(b *testing.B) {
	c := redistest.NewClient(b)
	l := NewRedis(c)
	var n atomic.Int64
	ctx := context.Background()
	b.Run("pipelined", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := l.Consume(ctx, "b"+strconv.FormatInt(n.Add(1), 10), time.Minute); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("one roundtrip each", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, err := c.SetNX(ctx, c.Key("lease", "used", "b"+strconv.FormatInt(n.Add(1), 10)), 1, time.Minute).Result(); err != nil || !ok {
					b.Error(err, ok)
					return
				}
			}
		})
	})
}
