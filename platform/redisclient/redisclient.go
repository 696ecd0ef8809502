package redisclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Client is a go-redis client with a key prefix. Under Sentinel the
// embedded client is go-redis's failover client: it asks the sentinels for
// the primary and follows a failover without a restart.
type Client struct {
	*redis.Client
	prefix string
	acks   int
}

// New returns a client for cfg (see [Config] for the URL forms). Like
// [Open] it connects lazily; the error is about cfg only (wrapping
// [ErrConfig]) and shows the URL only redacted.
func New(cfg Config, prefix string) (*Client, error) {
	o, err := cfg.options()
	if err != nil {
		return nil, err
	}
	var c *redis.Client
	if o.single != nil {
		c = redis.NewClient(o.single)
	} else {
		c = redis.NewFailoverClient(o.failover)
	}
	return &Client{Client: c, prefix: prefix, acks: o.acks}, nil
}

// Open returns a plaintext client for addr (host:port), without
// credentials: tests and tools on a local Redis. Services use [New]. Like a pgx pool it connects lazily, so a
// service starts while Redis is down and reports NOT_SERVING until [Ping]
// succeeds.
func Open(addr, prefix string) *Client {
	c := redis.NewClient(&redis.Options{
		Addr:         addr,
		DialTimeout:  dialTimeout,
		ReadTimeout:  readTimeout,
		WriteTimeout: writeTimeout,
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

// AckReplicas is how many replicas must acknowledge a write that must
// survive a failover before it counts ([Client.AckPipelined]); 0 means no
// WAIT.
func (c *Client) AckReplicas() int { return c.acks }

// ErrNotReplicated: a [Client.AckPipelined] pipeline ran, but fewer than
// [Client.AckReplicas] replicas acknowledged it within [AckTimeout]; a
// failover could lose its writes.
var ErrNotReplicated = errors.New("redis: writes not acknowledged by enough replicas")

// AckPipelined runs fn's commands in one pipeline ended, when
// [Client.AckReplicas] > 0, by `WAIT` on the same connection. Each command
// holds its own reply; the error is the pipeline's, or one wrapping
// [ErrNotReplicated]: then a write that succeeded may still be lost by a
// failover, and must not be counted on.
func (c *Client) AckPipelined(ctx context.Context, fn func(redis.Pipeliner)) error {
	var wait *redis.Cmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		fn(p)
		if c.acks > 0 {
			wait = p.Do(ctx, "WAIT", c.acks, AckTimeout.Milliseconds())
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if wait != nil {
		n, werr := wait.Int64()
		if werr != nil {
			return fmt.Errorf("%w: %v", ErrNotReplicated, werr)
		}
		if n < int64(c.acks) {
			return fmt.Errorf("%w: %d of %d in %v", ErrNotReplicated, n, c.acks, AckTimeout)
		}
	}
	return nil
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
