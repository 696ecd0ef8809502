package config

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestPrecedenceFlagThenEnvThenDefault(t *testing.T) {
	var c Common
	s := NewSet("registry", env(map[string]string{
		"TOOLCRIB_REGISTRY_LISTEN":  "127.0.0.1:9000",
		"TOOLCRIB_POSTGRES_URL":     "postgres://env@h/db",
		"TOOLCRIB_SHUTDOWN_TIMEOUT": "3s",
	}))
	c.Register(s, "registry", Defaults{ListenAddr: "127.0.0.1:7101", MetricsAddr: "127.0.0.1:9101", UsesRedis: true})
	if err := s.Parse([]string{"--postgres-url", "postgres://flag@h/db"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ListenAddr != "127.0.0.1:9000" || c.PostgresURL != "postgres://flag@h/db" || c.ShutdownTimeout != 3*time.Second ||
		c.MetricsAddr != "127.0.0.1:9101" || c.RedisAddr != "127.0.0.1:6379" {
		t.Fatalf("%+v", c)
	}
}

func TestEveryProblemReportedTogether(t *testing.T) {
	var c Common
	s := NewSet("registry", env(map[string]string{"TOOLCRIB_SHUTDOWN_TIMEOUT": "soon"}))
	c.Register(s, "registry", Defaults{ListenAddr: "nope", MetricsAddr: ""})
	err := s.Parse([]string{"--log-level", "loud", "--postgres-url", "mysql://x"})
	if err == nil || !strings.Contains(err.Error(), "TOOLCRIB_SHUTDOWN_TIMEOUT") {
		t.Fatalf("parse: %v", err)
	}
	err = c.Validate()
	for _, want := range []string{"--listen", "--log-level", "--postgres-url"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation error %v does not name %s", err, want)
		}
	}
	if err := s.Parse([]string{"extra"}); err == nil {
		t.Fatal("stray argument accepted")
	}
}
