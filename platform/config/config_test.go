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
		c.MetricsAddr != "127.0.0.1:9101" || c.Redis().URL != DefaultRedisURL {
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

// The platform tenant and the maximum token lifetime have defaults,
// environment twins and flags, and bad values are refused by name.
func TestAuthPlatformTenantAndMaxTokenLifetime(t *testing.T) {
	var c Common
	s := NewSet("registry", env(nil))
	c.Register(s, "registry", Defaults{ListenAddr: "127.0.0.1:7101"})
	if err := s.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if c.AuthPlatformTenant != DefaultPlatformTenant || c.AuthMaxTokenLifetime != 24*time.Hour {
		t.Fatalf("defaults %q %v", c.AuthPlatformTenant, c.AuthMaxTokenLifetime)
	}
	c = Common{}
	s = NewSet("registry", env(map[string]string{"TOOLCRIB_AUTH_PLATFORM_TENANT": "ops", "TOOLCRIB_AUTH_MAX_TOKEN_LIFETIME": "1h"}))
	c.Register(s, "registry", Defaults{ListenAddr: "127.0.0.1:7101"})
	if err := s.Parse(nil); err != nil || c.AuthPlatformTenant != "ops" || c.AuthMaxTokenLifetime != time.Hour {
		t.Fatalf("environment: %q %v %v", c.AuthPlatformTenant, c.AuthMaxTokenLifetime, err)
	}
	c = Common{}
	s = NewSet("registry", env(nil))
	c.Register(s, "registry", Defaults{ListenAddr: "127.0.0.1:7101"})
	if err := s.Parse([]string{"--auth-platform-tenant", "", "--auth-max-token-lifetime", "0s"}); err != nil {
		t.Fatal(err)
	}
	err := c.Validate()
	for _, want := range []string{"--auth-platform-tenant", "--auth-max-token-lifetime"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation error %v does not name %s", err, want)
		}
	}
}

// The TLS flags have environment twins, and a TLS configuration that cannot
// work is refused by flag name before any file is read.
func TestTLSFlags(t *testing.T) {
	var c Common
	s := NewSet("registry", env(map[string]string{
		"TOOLCRIB_TLS_CERT_FILE":          "/certs/tls.crt",
		"TOOLCRIB_TLS_KEY_FILE":           "/certs/tls.key",
		"TOOLCRIB_TLS_CLIENT_CA_FILE":     "/certs/ca.crt",
		"TOOLCRIB_TLS_CA_FILE":            "/certs/ca.crt",
		"TOOLCRIB_TLS_CLIENT_CERT_FILE":   "/certs/tls.crt",
		"TOOLCRIB_TLS_CLIENT_KEY_FILE":    "/certs/tls.key",
		"TOOLCRIB_TLS_MIN_VERSION":        "1.2",
		"TOOLCRIB_METRICS_TLS":            "true",
		"TOOLCRIB_TLS_SERVICE_IDENTITIES": "spiffe://example.org/toolcrib/admission,spiffe://example.org/toolcrib/lease",
	}))
	c.Register(s, "registry", Defaults{ListenAddr: "127.0.0.1:7101"})
	if err := s.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.TLS.CertFile != "/certs/tls.crt" || c.TLS.ClientCAFile != "/certs/ca.crt" || c.TLS.ClientKeyFile != "/certs/tls.key" ||
		c.TLS.MinVersion != "1.2" || !c.MetricsTLS || !strings.HasSuffix(c.TLSServiceIdentities, "/toolcrib/lease") {
		t.Fatalf("%+v", c)
	}

	c = Common{}
	s = NewSet("registry", env(nil))
	c.Register(s, "registry", Defaults{ListenAddr: "127.0.0.1:7101"})
	if err := s.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.TLS.ServerEnabled() || c.TLS.ClientEnabled() || c.TLS.MinVersion != "1.3" {
		t.Fatalf("defaults: plaintext with 1.3 when TLS is on; got %+v, %v", c.TLS, err)
	}

	c = Common{}
	s = NewSet("registry", env(nil))
	c.Register(s, "registry", Defaults{ListenAddr: "127.0.0.1:7101"})
	if err := s.Parse([]string{"--tls-min-version", "1.1", "--metrics-tls", "--tls-client-ca-file", "/ca.crt",
		"--tls-service-identities", "spiffe://example.org/admission"}); err != nil {
		t.Fatal(err)
	}
	err := c.Validate()
	for _, want := range []string{
		`--tls-min-version: "1.1" must be 1.2 or 1.3`,
		"--tls-client-ca-file: needs --tls-cert-file and --tls-key-file",
		"--metrics-tls: needs --tls-cert-file and --tls-key-file",
		`--tls-service-identities: "spiffe://example.org/admission": not a service identity`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation error %v does not say %s", err, want)
		}
	}
	c = Common{}
	s = NewSet("registry", env(nil))
	c.Register(s, "registry", Defaults{ListenAddr: "127.0.0.1:7101"})
	if err := s.Parse([]string{"--tls-service-identities", "spiffe://example.org/toolcrib/admission"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--tls-service-identities: needs --tls-client-ca-file") {
		t.Fatalf("identities without client CAs: %v", err)
	}
}

// TestRedisURLAndTheDeprecatedAddr: --redis-url (or TOOLCRIB_REDIS_URL)
// names Redis; the old --redis-addr (or TOOLCRIB_REDIS_ADDR) still works as
// redis://host:port; setting both is refused; a bad URL is refused without
// showing its password.
func TestRedisURLAndTheDeprecatedAddr(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    string // the URL, or the error when wantErr
		wantErr bool
	}{
		{"default", nil, nil, "redis://127.0.0.1:6379", false},
		{"url flag", nil, []string{"--redis-url", "rediss://svc:pw@cache:6380/2"}, "rediss://svc:pw@cache:6380/2", false},
		{"url env", map[string]string{"TOOLCRIB_REDIS_URL": "redis-sentinel://s1:26379,s2:26379/main"}, nil, "redis-sentinel://s1:26379,s2:26379/main", false},
		{"addr flag", nil, []string{"--redis-addr", "cache:6379"}, "redis://cache:6379", false},
		{"addr env", map[string]string{"TOOLCRIB_REDIS_ADDR": "cache:6379"}, nil, "redis://cache:6379", false},
		{"both", map[string]string{"TOOLCRIB_REDIS_ADDR": "cache:6379"}, []string{"--redis-url", "redis://other:6379"}, "--redis-addr: deprecated alias of --redis-url: set only --redis-url", true},
		{"bad addr", nil, []string{"--redis-addr", "cache"}, `--redis-addr: "cache" is not host:port`, true},
		{"bad url", nil, []string{"--redis-url", "redis://svc:hunter2@cache"}, "--redis-url: redis configuration: redis://svc:xxxxx@cache: needs host:port", true},
		{"tls files without tls", nil, []string{"--redis-tls-ca-file", "/ca.pem"}, "--redis-url: redis configuration: redis://127.0.0.1:6379: TLS files given for a plaintext URL", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Common
			s := NewSet("lease", env(tc.env))
			c.Register(s, "lease", Defaults{ListenAddr: "127.0.0.1:7104", UsesRedis: true})
			if err := s.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := c.Validate()
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want %q", err, tc.want)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Redis().URL; got != tc.want {
				t.Fatalf("URL = %q, want %q", got, tc.want)
			}
		})
	}
}
