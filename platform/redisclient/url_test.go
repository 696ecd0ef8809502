package redisclient

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const secret = "s3cr3t-pa55"

func TestConfigOptions(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		check     func(t *testing.T, o options)
	}{
		{"acl user and database", "redis://svc:" + secret + "@10.0.0.1:6380/3", func(t *testing.T, o options) {
			s := o.single
			if s == nil || s.Addr != "10.0.0.1:6380" || s.Username != "svc" || s.Password != secret || s.DB != 3 || s.TLSConfig != nil || o.acks != 0 {
				t.Fatalf("%+v acks %d", s, o.acks)
			}
		}},
		{"tls", "rediss://svc:" + secret + "@cache.internal:6380", func(t *testing.T, o options) {
			if o.single.TLSConfig == nil || o.single.TLSConfig.ServerName != "" || o.single.TLSConfig.RootCAs != nil {
				t.Fatalf("want TLS verified against the dialled name and the system roots, got %+v", o.single.TLSConfig)
			}
		}},
		{"sentinel", "redis-sentinel://svc:" + secret + "@10.0.0.1:26379,10.0.0.2:26379/main/2?sentinel_password=sp", func(t *testing.T, o options) {
			f := o.failover
			if f == nil || f.MasterName != "main" || f.DB != 2 || f.Username != "svc" || f.Password != secret ||
				strings.Join(f.SentinelAddrs, ",") != "10.0.0.1:26379,10.0.0.2:26379" || f.SentinelPassword != "sp" || f.TLSConfig != nil || o.acks != 1 {
				t.Fatalf("%+v acks %d", f, o.acks)
			}
		}},
		{"sentinel tls", "rediss-sentinel://10.0.0.1:26379/main", func(t *testing.T, o options) {
			if o.failover.TLSConfig == nil || o.failover.TLSConfig.ServerName != "" {
				t.Fatalf("%+v", o.failover.TLSConfig)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Config{URL: tc.url}.options()
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

// TestConfigErrorsNeverShowThePassword: every refusal names the problem and
// shows the URL redacted, even when the URL does not parse.
func TestConfigErrorsNeverShowThePassword(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"unparseable", Config{URL: "redis://u:" + secret + "@host:port:x"}, "(unparseable URL): not a URL"},
		{"scheme", Config{URL: "http://u:" + secret + "@h:1"}, "http://u:xxxxx@h:1: scheme must be"},
		{"no port", Config{URL: "redis://u:" + secret + "@h"}, "redis://u:xxxxx@h: needs host:port"},
		{"database", Config{URL: "redis://u:" + secret + "@h:1/x"}, `redis://u:xxxxx@h:1/x: invalid database number: "x"`},
		{"tls files on plaintext", Config{URL: "redis://u:" + secret + "@h:1", TLSCAFile: notPEM}, "TLS files given for a plaintext URL"},
		{"ca not pem", Config{URL: "rediss://u:" + secret + "@h:1", TLSCAFile: notPEM}, "holds no PEM certificate"},
		{"cert without key", Config{URL: "rediss://u:" + secret + "@h:1", TLSCertFile: notPEM}, "certificate and key go together"},
		{"sentinel without master", Config{URL: "redis-sentinel://u:" + secret + "@h:1"}, "needs the master name"},
		{"sentinel address", Config{URL: "redis-sentinel://u:" + secret + "@h:1,h2:/m"}, `sentinel "h2:" is not host:port`},
		{"sentinel query", Config{URL: "redis-sentinel://h:1/m?sentinel_password=" + secret + "&x=1"}, `unknown query parameter "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Check()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrConfig with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://svc:" + secret + "@h:1/2":                       "redis://svc:xxxxx@h:1/2",
		"redis://:" + secret + "@h:1":                            "redis://:xxxxx@h:1",
		"redis-sentinel://a:1,b:2/m?sentinel_password=" + secret: "redis-sentinel://a:1,b:2/m?sentinel_password=xxxxx",
		"rediss://h:1?password=" + secret + "&dial_timeout=3":    "rediss://h:1?dial_timeout=3&password=xxxxx",
		"redis://u:" + secret + "@h:port":                        "(unparseable URL)",
		"redis://127.0.0.1:6379":                                 "redis://127.0.0.1:6379",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAckReplicas(t *testing.T) {
	for _, tc := range []struct {
		url  string
		set  int
		want int
	}{
		{"redis-sentinel://h:1/m", 0, 1},
		{"redis-sentinel://h:1/m", -1, 0},
		{"redis-sentinel://h:1/m", 2, 2},
		{"redis://h:1", 0, 0},
		{"redis://h:1", 1, 1},
	} {
		c, err := New(Config{URL: tc.url, AckReplicas: tc.set}, "p:")
		if err != nil {
			t.Fatal(err)
		}
		if got := c.AckReplicas(); got != tc.want {
			t.Errorf("%s with %d: AckReplicas = %d, want %d", tc.url, tc.set, got, tc.want)
		}
		c.Close()
	}
}
