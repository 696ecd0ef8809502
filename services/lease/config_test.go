package lease_test

import (
	"strings"
	"testing"
	"time"

	service "github.com/toolcrib/toolcrib/services/lease"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseConfigDefaultsAndEnvironment(t *testing.T) {
	cfg, err := service.ParseConfig([]string{"--key-file", "/tmp/k.json"}, env(map[string]string{"TOOLCRIB_LEASE_SKEW": "2s"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ListenAddr != service.DefaultListenAddr || cfg.MetricsAddr != service.DefaultMetricsAddr || cfg.Redis().URL != "redis://127.0.0.1:6379" ||
		cfg.Skew != 2*time.Second || cfg.KeyRotateEvery != 24*time.Hour || cfg.ProofWindow != 30*time.Second {
		t.Fatalf("config %+v", cfg)
	}
}

func TestConfigReportsEveryProblem(t *testing.T) {
	_, err := service.ParseConfig([]string{"--lease-skew", "1m", "--proof-window", "2m", "--key-rotate-every", "10s",
		"--admission-addr", "nope", "--redis-url", ""}, env(nil))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, flag := range []string{"--key-file", "--lease-skew", "--proof-window", "--key-rotate-every", "--admission-addr", "--redis-url"} {
		if !strings.Contains(err.Error(), flag+":") {
			t.Errorf("the error does not name %s: %v", flag, err)
		}
	}
}
