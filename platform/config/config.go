package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/platform/tlsconfig"
)

// Set is a flag set whose flags fall back to environment variables.
type Set struct {
	fs      *flag.FlagSet
	lookup  func(string) (string, bool)
	envErrs []error
	envs    map[string]string // flag name -> env var name
	order   []string          // flag names in registration order
	usage   map[string]string // flag name -> usage without the env suffix
}

// NewSet returns a Set for the named command. lookup reads the environment;
// nil means os.LookupEnv.
func NewSet(name string, lookup func(string) (string, bool)) *Set {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &Set{fs: fs, lookup: lookup, envs: map[string]string{}, usage: map[string]string{}}
}

// FlagSet returns the underlying flag set, e.g. for printing usage.
func (s *Set) FlagSet() *flag.FlagSet { return s.fs }

// EnvName returns the environment variable that backs a flag.
func EnvName(flagName string) string {
	return "TOOLCRIB_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (s *Set) env(name, env string) (string, bool) {
	if env == "" {
		env = EnvName(name)
	}
	s.envs[name] = env
	return s.lookup(env)
}

// describe records a flag's usage and its place in the registration order,
// and returns the usage as the flag set shows it (with its env twin).
func (s *Set) describe(name, usage string) string {
	if _, ok := s.usage[name]; !ok {
		s.order = append(s.order, name)
	}
	s.usage[name] = usage
	return usage + " (env " + s.envs[name] + ")"
}

// String registers a string flag. env names the environment variable; empty
// means [EnvName] of the flag.
func (s *Set) String(p *string, name, env, def, usage string) {
	if v, ok := s.env(name, env); ok {
		def = v
	}
	s.fs.StringVar(p, name, def, s.describe(name, usage))
}

// Duration registers a duration flag.
func (s *Set) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	if v, ok := s.env(name, env); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			s.envErrs = append(s.envErrs, fmt.Errorf("%s=%q: not a duration (e.g. 5s, 2m)", s.envs[name], v))
		} else {
			def = d
		}
	}
	s.fs.DurationVar(p, name, def, s.describe(name, usage))
}

// Int registers an int flag.
func (s *Set) Int(p *int, name, env string, def int, usage string) {
	if v, ok := s.env(name, env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.envErrs = append(s.envErrs, fmt.Errorf("%s=%q: not an integer", s.envs[name], v))
		} else {
			def = n
		}
	}
	s.fs.IntVar(p, name, def, s.describe(name, usage))
}

// Float64 registers a float64 flag.
func (s *Set) Float64(p *float64, name, env string, def float64, usage string) {
	if v, ok := s.env(name, env); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			s.envErrs = append(s.envErrs, fmt.Errorf("%s=%q: not a number", s.envs[name], v))
		} else {
			def = f
		}
	}
	s.fs.Float64Var(p, name, def, s.describe(name, usage))
}

// Bool registers a bool flag.
func (s *Set) Bool(p *bool, name, env string, def bool, usage string) {
	if v, ok := s.env(name, env); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.envErrs = append(s.envErrs, fmt.Errorf("%s=%q: not a boolean", s.envs[name], v))
		} else {
			def = b
		}
	}
	s.fs.BoolVar(p, name, def, s.describe(name, usage))
}

// Parse parses args. It returns every malformed environment value and the
// first flag error together.
func (s *Set) Parse(args []string) error {
	errs := append([]error(nil), s.envErrs...)
	if err := s.fs.Parse(args); err != nil {
		errs = append(errs, err)
	} else if s.fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %q", s.fs.Args()))
	}
	return errors.Join(errs...)
}

// Usage returns the flag help text.
func (s *Set) Usage() string {
	var b strings.Builder
	s.fs.SetOutput(&b)
	s.fs.PrintDefaults()
	s.fs.SetOutput(io.Discard)
	return b.String()
}

// Common is the configuration every service shares.
type Common struct {
	// ListenAddr is the gRPC address (host:port).
	ListenAddr string
	// MetricsAddr is the HTTP address of /metrics; empty disables it.
	MetricsAddr string
	// PostgresURL is the connection URL.
	PostgresURL string
	// RedisURL says where Redis is and how to reach it (scheme, ACL user,
	// database, Sentinel); see [redisclient.Config]. Empty when the service
	// uses none. Read it through [Common.Redis].
	RedisURL string
	// RedisAddr is the deprecated bare host:port: read as redis://host:port
	// when RedisURL keeps its default.
	RedisAddr string
	// RedisTLSCAFile, RedisTLSCertFile and RedisTLSKeyFile are the CA bundle
	// that signs the Redis server certificates and the client pair, for a
	// rediss:// or rediss-sentinel:// URL.
	RedisTLSCAFile, RedisTLSCertFile, RedisTLSKeyFile string
	// RedisAckReplicas is how many replicas must acknowledge a single-use
	// record: 0 is 1 under Sentinel and none otherwise; negative is none.
	RedisAckReplicas int
	// RedisPrefix prefixes every Redis key the service writes.
	RedisPrefix string
	// LogLevel is the minimum level logged.
	LogLevel slog.Level
	// LogFormat is `json` or `text`.
	LogFormat string
	// AccessLog logs every finished gRPC call at info, successful ones
	// included; without it they are at debug (rpcserver.Options.AccessLog).
	AccessLog bool
	// ShutdownTimeout bounds the graceful drain on a signal.
	ShutdownTimeout time.Duration
	// Migrate runs the service's migrations at start-up.
	Migrate bool
	// AuthJWKS is the path of the JWKS file with the identity provider's
	// public keys.
	AuthJWKS string
	// AuthIssuer is the required `iss` claim; empty accepts any.
	AuthIssuer string
	// AuthAudience is the required `aud` claim.
	AuthAudience string
	// AuthPlatformTenant is the tenant (the token's `tenant` claim) whose
	// members may be admins and services; the admin and service groups of
	// any other tenant give no role.
	AuthPlatformTenant string
	// AuthMaxTokenLifetime is the longest lifetime (exp - iat) a token may
	// have; longer-lived tokens are refused.
	AuthMaxTokenLifetime time.Duration
	// AuthDiscovery finds the keys of AuthIssuer (one or more issuer URLs,
	// comma-separated) by OpenID Connect discovery instead of reading
	// AuthJWKS; see issuers.go for it and the other OpenID provider fields.
	AuthDiscovery bool
	// AuthIssuersFile is a JSON file of issuers ([principal.Issuer]), one
	// entry per OpenID provider with its own tenant mapping; it implies
	// discovery and replaces AuthIssuer and the single-issuer fields.
	AuthIssuersFile string
	// AuthTenant maps the AuthIssuer issuers to one tenant.
	AuthTenant string
	// AuthTenantClaim and AuthGroupsClaim name the claims of the AuthIssuer
	// issuers carrying tenant and groups.
	AuthTenantClaim, AuthGroupsClaim string
	// AuthKeysRefresh is how often issuer keys are fetched again.
	AuthKeysRefresh time.Duration
	// AuthKeysMaxStale is how long an unreachable issuer's last good keys
	// stay trusted before its tokens are refused.
	AuthKeysMaxStale time.Duration
	// AdminGroup is the group whose members (of the platform tenant) are
	// platform admins.
	AdminGroup string
	// ServiceGroup is the group whose members (of the platform tenant) are
	// toolcrib services.
	ServiceGroup string
	// ConfirmerGroup is the group whose members (of the platform tenant) are
	// confirmers: they may assert, beside a user's token, that the user
	// confirmed a call (principal.ConfirmerMetadataKey). Registered as a
	// flag only where a confirmation is decided (admission); empty
	// elsewhere, where nobody is a confirmer (the lease service forwards
	// an inline check's confirmer to admission and decides nothing of it).
	ConfirmerGroup string
	// ConditionClaims is the comma-separated allow-list of token claims a
	// grant's condition may read (`principal.claims`); registered with
	// ConfirmerGroup (admission decides both), empty elsewhere.
	ConditionClaims string
	// DependencyCheckInterval is how often Postgres and Redis are pinged to
	// keep the health status true.
	DependencyCheckInterval time.Duration
	// ServiceTokenFile holds the bearer token this service presents to other
	// toolcrib services; re-read when it changes. Empty when the service
	// calls none.
	ServiceTokenFile string
	// TLS names the certificate files of the listeners and of the
	// outgoing gRPC clients; all empty is plaintext (platform/tlsconfig).
	TLS tlsconfig.Options
	// MetricsTLS serves /metrics over TLS with the listener's certificate
	// (and its client-certificate requirement).
	MetricsTLS bool
	// TLSServiceIdentities are the comma-separated SPIFFE IDs whose
	// verified client certificate identifies a toolcrib service on a call
	// without a bearer token (platform/principal).
	TLSServiceIdentities string

	// Listening, when set, is called with the gRPC address once the service
	// listens (tests and the dev launcher use port 0). Not a flag.
	Listening func(grpcAddr string)
	// LogOutput, when set, receives the service's log instead of standard
	// error (tests read it). Not a flag.
	LogOutput io.Writer

	logLevel string
}

// Defaults are a service's own default addresses.
type Defaults struct {
	// ListenAddr, e.g. 127.0.0.1:7101.
	ListenAddr string
	// MetricsAddr, e.g. 127.0.0.1:9101.
	MetricsAddr string
	// UsesRedis registers the Redis flags.
	UsesRedis bool
	// Confirms registers --confirmer-group (admission: the one service
	// that decides a MODE_USER_CONFIRMED Check).
	Confirms bool
}

// DefaultPlatformTenant is the platform tenant unless configured otherwise.
const DefaultPlatformTenant = "toolcrib-platform"

// DefaultConfirmerGroup is the confirmer group unless configured otherwise.
const DefaultConfirmerGroup = "toolcrib-confirmers"

// DefaultPostgresURL is used when neither flag nor environment names one.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// DefaultRedisURL is used when neither flag nor environment names one.
const DefaultRedisURL = "redis://127.0.0.1:6379"

// Register adds the common flags for service (e.g. `registry`) to s.
// Listen and metrics addresses have service-specific environment variables
// (TOOLCRIB_REGISTRY_LISTEN); the rest are shared (TOOLCRIB_POSTGRES_URL).
func (c *Common) Register(s *Set, service string, d Defaults) {
	svc := strings.ToUpper(service)
	s.String(&c.ListenAddr, "listen", "TOOLCRIB_"+svc+"_LISTEN", d.ListenAddr, "gRPC listen address")
	s.String(&c.MetricsAddr, "metrics-listen", "TOOLCRIB_"+svc+"_METRICS_LISTEN", d.MetricsAddr, "Prometheus /metrics HTTP address; empty disables it")
	s.String(&c.PostgresURL, "postgres-url", "", DefaultPostgresURL, "PostgreSQL connection URL")
	if d.UsesRedis {
		s.String(&c.RedisURL, "redis-url", "", DefaultRedisURL, "Redis URL: redis://[user:password@]host:port[/db], rediss:// for TLS, redis-sentinel://[user:password@]host:port[,host:port...]/master[/db] (rediss-sentinel:// for TLS)")
		s.String(&c.RedisAddr, "redis-addr", "", "", "deprecated: Redis host:port, read as redis://host:port; use --redis-url")
		s.String(&c.RedisTLSCAFile, "redis-tls-ca-file", "", "", "PEM CA bundle that signs the Redis server certificates (rediss URLs); empty: the system roots")
		s.String(&c.RedisTLSCertFile, "redis-tls-cert-file", "", "", "client certificate presented to Redis (rediss URLs), with --redis-tls-key-file")
		s.String(&c.RedisTLSKeyFile, "redis-tls-key-file", "", "", "key of --redis-tls-cert-file")
		s.Int(&c.RedisAckReplicas, "redis-ack-replicas", "", 0, "replicas that must acknowledge a single-use record before it counts (WAIT); 0: 1 with Sentinel, none otherwise; -1: never wait")
		s.String(&c.RedisPrefix, "redis-prefix", "", "toolcrib:", "prefix of every Redis key")
	}
	s.String(&c.logLevel, "log-level", "", "info", "minimum log level: debug, info, warn, error")
	s.String(&c.LogFormat, "log-format", "", "text", "log format: text or json")
	s.Bool(&c.AccessLog, "access-log", "", false, "log every finished gRPC call at info, successful ones included (otherwise at debug)")
	s.Duration(&c.ShutdownTimeout, "shutdown-timeout", "", 15*time.Second, "how long a graceful stop may drain in-flight calls")
	s.Bool(&c.Migrate, "migrate", "", true, "run database migrations at start-up")
	s.String(&c.AuthJWKS, "auth-jwks", "", ".toolcrib/dev/jwks.json", "JWKS file with the identity provider's public keys")
	s.String(&c.AuthIssuer, "auth-issuer", "", "toolcrib-dev", "required token issuer (iss); empty accepts any. With --auth-discovery: the issuer URL(s), comma-separated, found by OpenID Connect discovery")
	s.String(&c.AuthAudience, "auth-audience", "", "toolcrib", "required token audience (aud)")
	s.String(&c.AuthPlatformTenant, "auth-platform-tenant", "", DefaultPlatformTenant, "tenant whose members may be admins and services; the admin and service groups count only there")
	s.Duration(&c.AuthMaxTokenLifetime, "auth-max-token-lifetime", "", principal.DefaultMaxTokenLifetime, "longest token lifetime (exp - iat) accepted")
	c.registerIssuers(s)
	s.String(&c.AdminGroup, "admin-group", "", "toolcrib-admins", "group whose members of the platform tenant are platform admins")
	s.String(&c.ServiceGroup, "service-group", "", "toolcrib-services", "group whose members of the platform tenant are toolcrib services")
	if d.Confirms {
		s.String(&c.ConfirmerGroup, "confirmer-group", "", DefaultConfirmerGroup, "group whose members of the platform tenant are confirmers: only they may assert that a user confirmed a call (MODE_USER_CONFIRMED); the admin and service groups do not")
		s.String(&c.ConditionClaims, "condition-claims", "", "", "comma-separated token claims a grant's condition may read as principal.claims (string values of at most 256 bytes; others are absent); empty: none")
	}
	s.Duration(&c.DependencyCheckInterval, "dependency-check-interval", "", 2*time.Second, "how often Postgres and Redis are checked for the health status")
	s.String(&c.ServiceTokenFile, "service-token-file", "", ".toolcrib/dev/service-token", "file with the bearer token this service presents to other toolcrib services")
	s.String(&c.TLS.CertFile, tlsconfig.FlagCertFile, "", "", "PEM certificate chain of the gRPC, MCP and metrics listeners; empty serves plaintext; re-read when it changes")
	s.String(&c.TLS.KeyFile, tlsconfig.FlagKeyFile, "", "", "PEM private key of --tls-cert-file; re-read when it changes")
	s.String(&c.TLS.ClientCAFile, tlsconfig.FlagClientCAFile, "", "", "PEM CAs of client certificates: the gRPC listener then requires a client certificate signed by one (mTLS); re-read when it changes")
	s.String(&c.TLS.MinVersion, tlsconfig.FlagMinVersion, "", "1.3", "lowest TLS version accepted and offered: 1.3 or 1.2")
	s.String(&c.TLS.CAFile, tlsconfig.FlagCAFile, "", "", "PEM CAs that outgoing gRPC clients verify toolcrib services against; setting it (or a client certificate) makes every client use TLS; re-read when it changes")
	s.String(&c.TLS.ClientCertFile, tlsconfig.FlagClientCertFile, "", "", "PEM certificate outgoing gRPC clients present (mTLS); re-read when it changes")
	s.String(&c.TLS.ClientKeyFile, tlsconfig.FlagClientKeyFile, "", "", "PEM private key of --tls-client-cert-file")
	s.Bool(&c.MetricsTLS, "metrics-tls", "", false, "serve /metrics over TLS with --tls-cert-file (requiring client certificates when --tls-client-ca-file is set)")
	s.String(&c.TLSServiceIdentities, "tls-service-identities", "", "", "comma-separated SPIFFE IDs (spiffe://<trust-domain>/toolcrib/<service>) whose verified client certificate identifies a toolcrib service on a call without a bearer token; the service role only")
}

// Validate reports every problem with the common configuration.
func (c *Common) Validate() error {
	var errs []error
	bad := Problems(&errs)
	if _, _, err := net.SplitHostPort(c.ListenAddr); err != nil {
		bad("listen", "%q is not host:port", c.ListenAddr)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			bad("metrics-listen", "%q is not host:port", c.MetricsAddr)
		}
	}
	if u, err := url.Parse(c.PostgresURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		bad("postgres-url", "must be a postgres:// URL")
	}
	if c.RedisAddr != "" {
		if _, _, err := net.SplitHostPort(c.RedisAddr); err != nil {
			bad("redis-addr", "%q is not host:port", c.RedisAddr)
		} else if c.RedisURL != "" && c.RedisURL != DefaultRedisURL {
			bad("redis-addr", "deprecated alias of --redis-url: set only --redis-url")
		}
	}
	if r := c.Redis(); r.URL != "" {
		if err := r.Check(); err != nil {
			bad("redis-url", "%v", err)
		}
	}
	if c.logLevel != "" {
		if err := c.LogLevel.UnmarshalText([]byte(c.logLevel)); err != nil {
			bad("log-level", "%q is not one of debug, info, warn, error", c.logLevel)
		}
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log-format", "%q is not text or json", c.LogFormat)
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown-timeout", "must be positive")
	}
	if c.DependencyCheckInterval <= 0 {
		bad("dependency-check-interval", "must be positive")
	}
	if c.AuthJWKS == "" && !c.UsesDiscovery() {
		bad("auth-jwks", "required")
	}
	c.validateIssuers(bad)
	if c.AuthAudience == "" {
		bad("auth-audience", "required")
	}
	if c.AdminGroup == "" {
		bad("admin-group", "required")
	}
	if !ids.ValidTenantID(c.AuthPlatformTenant) {
		bad("auth-platform-tenant", "must be a tenant id matching %s", ids.TenantIDPattern)
	}
	if c.AuthMaxTokenLifetime <= 0 {
		bad("auth-max-token-lifetime", "must be positive")
	}
	c.TLS.Validate(bad)
	if c.MetricsTLS && !c.TLS.ServerEnabled() {
		bad("metrics-tls", "needs --%s and --%s", tlsconfig.FlagCertFile, tlsconfig.FlagKeyFile)
	}
	if _, err := principal.ParseServiceIdentities(c.TLSServiceIdentities); err != nil {
		bad("tls-service-identities", "%v", err)
	} else if c.TLSServiceIdentities != "" && c.TLS.ClientCAFile == "" {
		bad("tls-service-identities", "needs --%s: only a verified client certificate identifies a service", tlsconfig.FlagClientCAFile)
	}
	return errors.Join(errs...)
}

// Redis returns the Redis configuration: --redis-url, or the deprecated
// --redis-addr as redis://host:port when --redis-url keeps its default. Its
// URL is empty when the service uses no Redis.
func (c *Common) Redis() redisclient.Config {
	u := c.RedisURL
	if c.RedisAddr != "" && (u == "" || u == DefaultRedisURL) {
		u = "redis://" + c.RedisAddr
	}
	return redisclient.Config{
		URL: u, TLSCAFile: c.RedisTLSCAFile, TLSCertFile: c.RedisTLSCertFile, TLSKeyFile: c.RedisTLSKeyFile,
		AckReplicas: c.RedisAckReplicas,
	}
}

// Logger builds the structured logger the configuration asks for.
// LogOutput, when set, replaces w.
func (c *Common) Logger(w io.Writer, service string) *slog.Logger {
	if c.LogOutput != nil {
		w = c.LogOutput
	}
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	var h slog.Handler
	if c.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h).With("service", service)
}
