package registry_test

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/services/registry"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := registry.ParseConfig(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ListenAddr != "127.0.0.1:7101" || cfg.MetricsAddr != "127.0.0.1:9101" || cfg.DiscoveryAddr != "127.0.0.1:7102" ||
		cfg.WatchHeartbeat != time.Second || cfg.WatchRetention != 24*time.Hour || cfg.WatchKeep != 10_000 ||
		cfg.ServiceTokenFile != ".toolcrib/dev/service-token" || cfg.Redis().URL != "" || !cfg.Migrate {
		t.Fatalf("defaults: %+v", cfg)
	}
}

// Flag beats environment beats default; every flag has an environment twin.
func TestParseConfigPrecedence(t *testing.T) {
	vars := map[string]string{
		"TOOLCRIB_REGISTRY_LISTEN":        "127.0.0.1:8101",
		"TOOLCRIB_DISCOVERY_ADDR":         "10.0.0.2:7102",
		"TOOLCRIB_WATCH_HEARTBEAT":        "250ms",
		"TOOLCRIB_WATCH_RETENTION":        "1h",
		"TOOLCRIB_WATCH_KEEP":             "5",
		"TOOLCRIB_WATCH_COMPACT_INTERVAL": "10s",
	}
	cfg, err := registry.ParseConfig([]string{"--watch-heartbeat=2s", "--discovery-addr="}, env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ListenAddr != "127.0.0.1:8101" || cfg.DiscoveryAddr != "" || cfg.WatchHeartbeat != 2*time.Second ||
		cfg.WatchRetention != time.Hour || cfg.WatchKeep != 5 || cfg.CompactInterval != 10*time.Second {
		t.Fatalf("precedence: %+v", cfg)
	}
}

// Every problem is reported at once, naming the flag.
func TestParseConfigReportsEveryProblem(t *testing.T) {
	_, err := registry.ParseConfig([]string{"--discovery-addr=nohost", "--service-token-file=", "--watch-heartbeat=0s",
		"--watch-keep=-1"}, env(map[string]string{"TOOLCRIB_WATCH_RETENTION": "a day"}))
	if err == nil {
		t.Fatal("accepted")
	}
	// The malformed environment value is reported with the flag errors'
	// parse; fix it and the validation errors show together.
	if !strings.Contains(err.Error(), `TOOLCRIB_WATCH_RETENTION="a day": not a duration`) {
		t.Fatalf("error %v", err)
	}
	_, err = registry.ParseConfig([]string{"--discovery-addr=nohost", "--service-token-file=", "--watch-heartbeat=0s",
		"--watch-keep=-1", "--listen=nope"}, env(nil))
	for _, want := range []string{`--discovery-addr: "nohost" is not host:port`, "--service-token-file: required while --discovery-addr is set",
		"--watch-heartbeat: must be positive", "--watch-keep: must not be negative", `--listen: "nope" is not host:port`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if _, err := registry.ParseConfig([]string{"-h"}, env(nil)); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if u := registry.Usage(); !strings.Contains(u, "-discovery-addr") || !strings.Contains(u, "TOOLCRIB_WATCH_HEARTBEAT") {
		t.Fatalf("usage:\n%s", u)
	}
}
