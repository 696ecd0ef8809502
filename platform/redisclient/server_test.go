package redisclient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/platform/tlsconfig/tlstest"
)

const password = "acl-s3cret"

// TestTLSAndACLUser: against redis-server serving only TLS (port 0) with
// the default user off and one ACL user, a client with the test CA and the
// user's password connects; a wrong password, plaintext, and another CA
// are refused, and no error shows the password.
func TestTLSAndACLUser(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "redis")
	caFile := ca.WriteCA(t, dir, "redis-ca")
	srvCert, srvKey := ca.Issue(t, tlstest.Leaf{CommonName: "redis-server", Server: true, Hosts: []string{"localhost"}}).Write(t, dir, "redis-server")
	otherCAFile := tlstest.NewCA(t, "other").WriteCA(t, dir, "other-ca")
	port := redistest.FreePort(t)
	redistest.StartServer(t, port, false,
		"port 0",
		fmt.Sprintf("tls-port %d", port),
		"tls-cert-file "+srvCert,
		"tls-key-file "+srvKey,
		"tls-ca-cert-file "+caFile,
		"tls-auth-clients optional",
		"user default off",
		"user toolcrib on >"+password+" ~toolcrib:* +@all -@dangerous",
	)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func(cfg redisclient.Config) error {
		c, err := redisclient.New(cfg, "toolcrib:")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.Set(ctx, c.Key("probe"), "1", time.Minute).Err()
	}
	good := fmt.Sprintf("rediss://toolcrib:%s@localhost:%d/0", password, port)

	if err := open(redisclient.Config{URL: good, TLSCAFile: caFile}); err != nil {
		t.Fatalf("the ACL user over TLS: %v", err)
	}
	clientCert, clientKey := ca.Issue(t, tlstest.Leaf{CommonName: "lease"}).Write(t, dir, "lease")
	if err := open(redisclient.Config{URL: good, TLSCAFile: caFile, TLSCertFile: clientCert, TLSKeyFile: clientKey}); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	for _, tc := range []struct {
		name string
		cfg  redisclient.Config
		want string
	}{
		{"wrong password", redisclient.Config{URL: strings.Replace(good, password, "wrong-pw", 1), TLSCAFile: caFile}, "WRONGPASS"},
		{"no credentials", redisclient.Config{URL: fmt.Sprintf("rediss://localhost:%d", port), TLSCAFile: caFile}, "NOAUTH"},
		{"plaintext", redisclient.Config{URL: strings.Replace(good, "rediss://", "redis://", 1)}, "EOF"},
		{"another CA", redisclient.Config{URL: good, TLSCAFile: otherCAFile}, "certificate signed by unknown authority"},
		{"system roots", redisclient.Config{URL: good}, "certificate signed by unknown authority"},
		{"wrong host name", redisclient.Config{URL: strings.Replace(good, "localhost", "127.0.0.1", 1), TLSCAFile: caFile}, "doesn't contain any IP SANs"},
		{"key pattern outside the ACL", redisclient.Config{URL: good, TLSCAFile: caFile}, "NOPERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.name == "key pattern outside the ACL" {
				c, _ := redisclient.New(tc.cfg, "elsewhere:")
				defer c.Close()
				err = c.Set(ctx, c.Key("x"), "1", time.Minute).Err()
			} else {
				err = open(tc.cfg)
			}
			if err == nil {
				t.Fatal("connected; want refused")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), password) {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// TestSentinelFailover: a client on the redis-sentinel URL writes under
// load while the primary is killed; writes wait (or fail) for a while, then
// succeed against the promoted replica without a new client, and every
// write a replica acknowledged (WAIT) is still there after the failover.
func TestSentinelFailover(t *testing.T) {
	d := redistest.StartSentinel(t)
	c, err := redisclient.New(redisclient.Config{URL: d.URL()}, "toolcrib-test:")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.AckReplicas() != 1 {
		t.Fatalf("ack replicas under Sentinel = %d, want 1", c.AckReplicas())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var (
		mu       sync.Mutex
		acked    []string
		failures atomic.Int64
		n        atomic.Int64
		slowest  atomic.Int64 // ns, of a write that succeeded
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := c.Key("load", fmt.Sprint(w), fmt.Sprint(i))
				wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
				began := time.Now()
				err := c.AckPipelined(wctx, func(p redis.Pipeliner) { p.Set(wctx, key, "1", time.Hour) })
				wcancel()
				n.Add(1)
				if err != nil {
					failures.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				if d := int64(time.Since(began)); d > slowest.Load() {
					slowest.Store(d)
				}
				mu.Lock()
				acked = append(acked, key)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	before := n.Load()
	d.Primary.Kill()
	killed := time.Now()

	// Commands succeed again, on the same client, against the new primary.
	var recovered time.Duration
	for {
		if err := c.Set(ctx, c.Key("after"), "1", time.Minute).Err(); err == nil {
			recovered = time.Since(killed)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no recovery after the primary was killed:\n%s", d.Sentinel.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d writes before the kill, %d in all, %d failed, the slowest that succeeded took %v; recovered %v after the kill",
		before, n.Load(), failures.Load(), time.Duration(slowest.Load()), recovered)
	promoted := 0
	for _, r := range d.Replicas {
		rc := redisclient.Open(r.Addr(), "")
		if role, _ := rc.Do(ctx, "ROLE").Slice(); len(role) > 0 && role[0] == "master" {
			promoted++
			if err := rc.Get(ctx, c.Key("after")).Err(); err != nil {
				t.Errorf("the write after the failover is not on the promoted replica: %v", err)
			}
		}
		rc.Close()
	}
	if promoted != 1 {
		t.Fatalf("%d replicas promoted, want 1", promoted)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range acked {
		if err := c.Get(ctx, k).Err(); err != nil {
			t.Fatalf("write %s was acknowledged by a replica and is lost after failover: %v", k, err)
		}
	}
	// A write in flight when the primary died waited for the failover
	// (go-redis retries it on the new primary) or failed.
	if failures.Load() == 0 && time.Duration(slowest.Load()) < 500*time.Millisecond {
		t.Fatal("no write failed or waited for the failover: the primary was not killed mid-load")
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("timed out")
	}
}
