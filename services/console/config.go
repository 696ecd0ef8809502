package console

import (
	"errors"
	"net"
	"net/url"
	"time"

	"github.com/toolcrib/toolcrib/platform/config"
)

// Default addresses (DESIGN §10): the console's HTTP(S) pages on 7106; its
// gRPC health port and metrics beside it.
const (
	DefaultHTTPListen  = "127.0.0.1:7106"
	DefaultListenAddr  = "127.0.0.1:7116"
	DefaultMetricsAddr = "127.0.0.1:9106"
)

// HealthName is the name the console's gRPC health status is reported
// under (the console has no gRPC API of its own).
const HealthName = "toolcrib.console.v1.Console"

// Config is the console's configuration.
type Config struct {
	config.Common

	// HTTPListen is the address of the pages (HTTPS with --tls-cert-file).
	HTTPListen string
	// PublicURL is the console's URL as browsers reach it (the OIDC
	// redirect URL is derived from it); empty means http(s)://<HTTPListen>.
	PublicURL string

	// RegistryAddr, DiscoveryAddr and AdmissionAddr are the services the
	// console calls, always with the signed-in user's token.
	RegistryAddr, DiscoveryAddr, AdmissionAddr string

	// OIDCIssuer is the OpenID provider users sign in with (authorization
	// code with PKCE); empty turns OIDC sign-in off.
	OIDCIssuer string
	// OIDCClientID and OIDCClientSecretFile are the console's client at
	// that provider (the secret file may be empty for a public client).
	OIDCClientID, OIDCClientSecretFile string
	// OIDCScopes are the scopes asked for, space-separated.
	OIDCScopes string
	// OIDCTokenField names the token of the token response the console
	// presents to the services: `access_token` (a JWT the services verify)
	// or `id_token`.
	OIDCTokenField string

	// DevSignIn offers signing in by pasting a token (`toolcrib dev token`):
	// for development; the token is verified as the services verify it.
	DevSignIn bool

	// SessionTTL bounds a browser session (and never outlives its token).
	SessionTTL time.Duration
	// CallTimeout bounds each call to a service.
	CallTimeout time.Duration

	// Ready, when set, is called with the console's base URL once it
	// listens (tests and the dev launcher use port 0). Not a flag.
	Ready func(baseURL string)
}

// OIDC token fields (--oidc-token).
const (
	TokenFieldAccess = "access_token"
	TokenFieldID     = "id_token"
)

func flags(cfg *Config, lookup func(string) (string, bool)) *config.Set {
	s := config.NewSet("console", lookup)
	cfg.Common.Register(s, "console", config.Defaults{ListenAddr: DefaultListenAddr, MetricsAddr: DefaultMetricsAddr, UsesRedis: true})
	s.String(&cfg.HTTPListen, "http-listen", "TOOLCRIB_CONSOLE_HTTP_LISTEN", DefaultHTTPListen, "address of the console's pages (HTTPS with --tls-cert-file, without client certificates)")
	s.String(&cfg.PublicURL, "public-url", "", "", "the console's URL as browsers reach it (the OIDC redirect is <public-url>/signin/callback); empty means http(s)://<http-listen>")
	s.String(&cfg.RegistryAddr, "registry-addr", "", "127.0.0.1:7101", "registry gRPC address (the signed-in user's token)")
	s.String(&cfg.DiscoveryAddr, "discovery-addr", "", "127.0.0.1:7102", "discovery gRPC address (the signed-in user's token)")
	s.String(&cfg.AdmissionAddr, "admission-addr", "", "127.0.0.1:7103", "admission gRPC address (the signed-in user's token)")
	s.String(&cfg.OIDCIssuer, "oidc-issuer", "TOOLCRIB_CONSOLE_OIDC_ISSUER", "", "OpenID provider users sign in with (authorization code with PKCE); empty turns OIDC sign-in off")
	s.String(&cfg.OIDCClientID, "oidc-client-id", "TOOLCRIB_CONSOLE_OIDC_CLIENT_ID", "", "the console's client id at --oidc-issuer")
	s.String(&cfg.OIDCClientSecretFile, "oidc-client-secret-file", "", "", "file with the console's client secret at --oidc-issuer; empty for a public client (PKCE only)")
	s.String(&cfg.OIDCScopes, "oidc-scopes", "", "openid profile", "scopes asked for at sign-in, space-separated")
	s.String(&cfg.OIDCTokenField, "oidc-token", "", TokenFieldAccess, "which token of the provider's answer the console presents to the services: access_token or id_token")
	s.Bool(&cfg.DevSignIn, "dev-sign-in", "TOOLCRIB_CONSOLE_DEV_SIGN_IN", false, "offer signing in by pasting a token (toolcrib dev token); development only")
	s.Duration(&cfg.SessionTTL, "session-ttl", "", 8*time.Hour, "longest browser session (never longer than its token)")
	s.Duration(&cfg.CallTimeout, "call-timeout", "", 10*time.Second, "deadline of each call to a service")
	return s
}

// ParseConfig reads the configuration from args (flags) and lookup (the
// environment; nil means os.LookupEnv): flag, then environment variable,
// then default. It reports every problem at once; -h gives flag.ErrHelp.
func ParseConfig(args []string, lookup func(string) (string, bool)) (Config, error) {
	return config.Parse(args, lookup, flags)
}

// Usage returns the help text of the console's flags.
func Usage() string { return config.Usage(flags) }

// Flags describes the console's flags in registration order; `make docs`
// writes docs/config/console.md from it.
func Flags() []config.Flag { return config.Describe(flags) }

// Validate reports every problem with the configuration.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate()}
	bad := config.Problems(&errs)
	for name, addr := range map[string]string{"http-listen": c.HTTPListen, "registry-addr": c.RegistryAddr,
		"discovery-addr": c.DiscoveryAddr, "admission-addr": c.AdmissionAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			bad(name, "%q is not host:port", addr)
		}
	}
	for name, v := range map[string]string{"public-url": c.PublicURL, "oidc-issuer": c.OIDCIssuer} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			bad(name, "must be an http(s) URL without query or fragment")
		}
	}
	if c.OIDCIssuer != "" && c.OIDCClientID == "" {
		bad("oidc-client-id", "required with --oidc-issuer")
	}
	if c.OIDCTokenField != TokenFieldAccess && c.OIDCTokenField != TokenFieldID {
		bad("oidc-token", "must be %s or %s", TokenFieldAccess, TokenFieldID)
	}
	if c.OIDCIssuer == "" && !c.DevSignIn {
		bad("oidc-issuer", "required unless --dev-sign-in: otherwise nobody can sign in")
	}
	if c.SessionTTL < time.Minute {
		bad("session-ttl", "at least 1m")
	}
	if c.CallTimeout <= 0 {
		bad("call-timeout", "must be positive")
	}
	if c.Redis().URL == "" {
		bad("redis-url", "required: browser sessions are kept in Redis")
	}
	return errors.Join(errs...)
}

// baseURL is the console's public URL given the address it listens on.
func (c *Config) baseURL(listening string) string {
	if c.PublicURL != "" {
		return c.PublicURL
	}
	if c.TLS.ServerEnabled() {
		return "https://" + listening
	}
	return "http://" + listening
}
