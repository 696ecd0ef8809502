package config

import (
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

// toy is a service configuration as every services/*/config.go writes one.
type toy struct {
	Common
	Peer  string
	Every time.Duration
}

func toyFlags(c *toy, lookup Lookup) *Set {
	s := NewSet("toy", lookup)
	c.Common.Register(s, "toy", Defaults{ListenAddr: "127.0.0.1:7199", MetricsAddr: "127.0.0.1:9199"})
	s.String(&c.Peer, "peer-addr", "", "127.0.0.1:7101", "the peer's gRPC address")
	s.Duration(&c.Every, "every", "TOOLCRIB_TOY_EVERY", time.Minute, "how often")
	return s
}

func (c *toy) Validate() error {
	errs := []error{c.Common.Validate()}
	bad := Problems(&errs)
	if c.Every <= 0 {
		bad("every", "must be positive")
	}
	if !strings.Contains(c.Peer, ":") {
		bad("peer-addr", "%q is not host:port", c.Peer)
	}
	return errors.Join(errs...)
}

func TestParseAppliesFlagsThenEnvThenValidates(t *testing.T) {
	c, err := Parse([]string{"--peer-addr", "10.0.0.1:1"}, env(map[string]string{"TOOLCRIB_TOY_EVERY": "5s"}), toyFlags)
	if err != nil {
		t.Fatal(err)
	}
	if c.Peer != "10.0.0.1:1" || c.Every != 5*time.Second || c.ListenAddr != "127.0.0.1:7199" {
		t.Fatalf("%+v", c)
	}

	// Validate runs on what was parsed, and every problem is reported.
	_, err = Parse([]string{"--every", "0s", "--peer-addr", "nohost"}, env(nil), toyFlags)
	want := "--every: must be positive\n--peer-addr: \"nohost\" is not host:port"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}

	// A malformed value stops before Validate; -h is flag.ErrHelp.
	if _, err := Parse([]string{"--every", "soon"}, env(nil), toyFlags); err == nil || !strings.Contains(err.Error(), "-every") {
		t.Fatalf("got %v", err)
	}
	if _, err := Parse([]string{"-h"}, env(nil), toyFlags); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("got %v, want flag.ErrHelp", err)
	}
}

// Help text and the docs/ tables show the defaults, never the values of the
// environment the command happens to run in.
func TestUsageAndDescribeIgnoreTheEnvironment(t *testing.T) {
	t.Setenv("TOOLCRIB_TOY_EVERY", "7s")
	t.Setenv("TOOLCRIB_PEER_ADDR", "10.9.9.9:1")
	u := Usage(toyFlags)
	if strings.Contains(u, "7s") || strings.Contains(u, "10.9.9.9") {
		t.Fatalf("usage shows the environment:\n%s", u)
	}
	if !strings.Contains(u, "the peer's gRPC address (env TOOLCRIB_PEER_ADDR)") || !strings.Contains(u, `(default "127.0.0.1:7101")`) {
		t.Fatalf("usage:\n%s", u)
	}

	got := Describe(toyFlags)
	var names []string
	byName := map[string]Flag{}
	for _, f := range got {
		names = append(names, f.Name)
		byName[f.Name] = f
	}
	// Registration order: the common flags first, then the service's own.
	if names[0] != "listen" || names[1] != "metrics-listen" || names[len(names)-2] != "peer-addr" || names[len(names)-1] != "every" {
		t.Fatalf("order: %v", names)
	}
	for _, want := range []Flag{
		{Name: "listen", Env: "TOOLCRIB_TOY_LISTEN", Default: "127.0.0.1:7199", Usage: "gRPC listen address"},
		{Name: "peer-addr", Env: "TOOLCRIB_PEER_ADDR", Default: "127.0.0.1:7101", Usage: "the peer's gRPC address"},
		{Name: "every", Env: "TOOLCRIB_TOY_EVERY", Default: "1m0s", Usage: "how often"},
		{Name: "migrate", Env: "TOOLCRIB_MIGRATE", Default: "true", Usage: "run database migrations at start-up"},
	} {
		if !reflect.DeepEqual(byName[want.Name], want) {
			t.Errorf("%s: got %+v, want %+v", want.Name, byName[want.Name], want)
		}
	}
	if _, ok := byName["redis-addr"]; ok {
		t.Error("redis-addr described for a service that registers no Redis flags")
	}
}

// A flag put on the underlying flag set directly is still described, after
// the registered ones.
func TestDescribeListsFlagsAddedToTheFlagSet(t *testing.T) {
	s := NewSet("toy", env(nil))
	var a string
	var b bool
	s.String(&a, "zeta", "", "z", "last by name, first registered")
	s.FlagSet().BoolVar(&b, "alpha", false, "raw")
	got := s.Describe()
	want := []Flag{
		{Name: "zeta", Env: "TOOLCRIB_ZETA", Default: "z", Usage: "last by name, first registered"},
		{Name: "alpha", Default: "false", Usage: "raw"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
