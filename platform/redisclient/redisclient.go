package redisclient

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client is a go-redis client with a key prefix.
type Client struct {
	*redis.Client
	prefix string
}

// Open returns a client for addr. Like a pgx pool it connects lazily, so a
// service starts while Redis is down and reports NOT_SERVING until [Ping]
// succeeds.
func Open(addr, prefix string) *Client {
	c := redis.NewClient(&redis.Options{
		Addr:         addr,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
	})
	return &Client{Client: c, prefix: prefix}
}

// Key returns the full key for parts joined by ':' under the prefix.
func (c *Client) Key(parts ...string) string {
	k := c.prefix
	for i, p := range parts {
		if i > 0 {
			k += ":"
		}
		k += p
	}
	return k
}

// Prefix returns the key prefix.
func (c *Client) Prefix() string { return c.prefix }

// Check pings Redis; it is a health dependency check.
func (c *Client) Check(ctx context.Context) error {
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// DeletePrefix removes every key under the prefix (tests and tooling).
func (c *Client) DeletePrefix(ctx context.Context) error {
	iter := c.Scan(ctx, 0, c.prefix+"*", 500).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := c.Del(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return c.Del(ctx, batch...).Err()
	}
	return nil
}
