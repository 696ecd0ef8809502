package redistest

import (
	"context"
	"testing"
)

func TestPrefixesIsolateAndClean(t *testing.T) {
	ctx := context.Background()
	var prefix string
	t.Run("writer", func(t *testing.T) {
		c := NewClient(t)
		prefix = c.Prefix()
		if err := c.Set(ctx, c.Key("a"), "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		other := NewClient(t)
		if n, _ := other.Exists(ctx, other.Key("a")).Result(); n != 0 {
			t.Fatal("a key is visible under another test's prefix")
		}
	})
	c := NewClient(t)
	if n, _ := c.Exists(ctx, prefix+"a").Result(); n != 0 {
		t.Fatal("a test's keys survived its end")
	}
}
