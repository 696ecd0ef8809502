// Package redistest gives each test its own Redis key prefix on the test
// Redis (TOOLCRIB_TEST_REDIS_ADDR, by default 127.0.0.1:6379) and deletes
// every key under it when the test ends, so tests never see each other's
// keys.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/redisclient"
)

// Addr returns the test Redis address.
func Addr() string {
	if a := os.Getenv("TOOLCRIB_TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// NewPrefix returns a fresh key prefix, cleaned up when the test ends.
func NewPrefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "toolcrib-test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		c := redisclient.Open(Addr(), prefix)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.DeletePrefix(ctx); err != nil {
			t.Errorf("redistest: clean %s: %v", prefix, err)
		}
	})
	return prefix
}

// NewClient returns a client under a fresh prefix; closed and cleaned when
// the test ends.
func NewClient(t testing.TB) *redisclient.Client {
	t.Helper()
	c := redisclient.Open(Addr(), NewPrefix(t))
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Check(ctx); err != nil {
		t.Fatalf("redistest: %v (is Redis running at %s?)", err, Addr())
	}
	return c
}
