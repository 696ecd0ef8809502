package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/egress"
	"github.com/toolcrib/toolcrib/platform/secretref"
)

// Default addresses (DESIGN §10): MCP on 7105; the gRPC health port and
// metrics beside it.
const (
	DefaultMCPListen   = "127.0.0.1:7105"
	DefaultListenAddr  = "127.0.0.1:7115"
	DefaultMetricsAddr = "127.0.0.1:9105"
	// MCPPath is the path of the MCP endpoint.
	MCPPath = "/mcp"
	// MetadataPath is the path of the OAuth protected-resource metadata
	// (RFC 9728).
	MetadataPath = "/.well-known/oauth-protected-resource"
)

// MaxArtifactBytesLimit bounds --max-artifact-bytes: an upstream's answer
// is read whole into memory (up to about twice this, see
// [upstream.MaxMessageBytes]) before it is stored.
const MaxArtifactBytesLimit = 512 << 20

// Config is the gateway's configuration.
type Config struct {
	config.Common

	// MCPListen is the address of the MCP endpoint (HTTP, path /mcp).
	MCPListen string
	// PublicURL is the MCP endpoint's URL as clients reach it (the
	// resource of the protected-resource metadata); empty means
	// http://<MCPListen>/mcp.
	PublicURL string
	// PeerURL is the URL the other replicas reach this replica's MCP
	// endpoint at, directly (not through the balancer): they pass it the
	// requests of the sessions it holds. Empty means
	// http(s)://<the listener's address>/mcp, right when the listener has a
	// specific address the peers can dial.
	PeerURL string
	// AuthorizationServer is the operator's OAuth issuer URL named in the
	// protected-resource metadata; empty names none.
	AuthorizationServer string

	// AdmissionAddr, LeaseAddr and RegistryAddr are the toolcrib services
	// the gateway calls: admission and lease with the client's token, the
	// registry (contracts, descriptors, servers, audience classes) with the
	// service token.
	AdmissionAddr, LeaseAddr, RegistryAddr string
	// DiscoveryAddr is discovery's gRPC address (GetSnapshot: a
	// generation's descriptors, for titles and output schemas; the service
	// token).
	DiscoveryAddr string

	// CursorKeyFile holds the key that signs tools/list cursors (created
	// when absent); replicas that share it accept each other's cursors.
	CursorKeyFile string
	// PageSize is the number of tools per tools/list page.
	PageSize int
	// ListTTL is the ttlMs hint of list results (cacheScope is always
	// private: a list belongs to one principal).
	ListTTL time.Duration
	// WatchInterval is how often the visible set of a principal with an
	// open subscriptions/listen stream is re-read to send list_changed.
	WatchInterval time.Duration
	// IdleTimeout is how long a principal's state (its last listing) is
	// kept after its last request.
	IdleTimeout time.Duration
	// MaxSessionsPerPrincipal bounds the open MCP sessions (2025-11-25 and
	// older clients) of one principal on one replica; an initialize past it
	// is refused 429 until one ends or idles out.
	MaxSessionsPerPrincipal int

	// StdioCredentialEnv is the variable a stdio server gets the audience
	// class's credential in (as discovery's --stdio-credential-env).
	StdioCredentialEnv string
	// LeaseAudiencePrefix prefixes the server id to form the executor
	// audience of a lease (`executor.` gives `executor.inventory`).
	LeaseAudiencePrefix string
	// DefaultDeadline bounds an upstream call whose contract sets no
	// deadline_ms.
	DefaultDeadline time.Duration
	// ConfirmTTL is how long a confirmation request stays answerable.
	ConfirmTTL time.Duration
	// ConfirmerTokenFile holds the gateway's own confirmer token (a member
	// of the confirmer group of the platform tenant), presented beside the
	// user's token when it re-checks a call the user confirmed; re-read
	// when it changes. Empty: the gateway cannot assert a confirmation, and
	// a call that needs one is denied without asking.
	ConfirmerTokenFile string

	// ResultBudget is the largest result (bytes of its JSON) given to the
	// model inline when the contract sets no result_budget_bytes; larger
	// ones become artifacts.
	ResultBudget int
	// PreviewBytes bounds the head and the tail of an artifact's preview.
	PreviewBytes int
	// ArtifactRetention is how long an artifact is kept.
	ArtifactRetention time.Duration
	// MaxArtifactBytes is the largest result stored as an artifact; larger
	// results are refused.
	MaxArtifactBytes int
	// ArtifactQuotaBytes and ArtifactQuotaCount bound each tenant's
	// unexpired artifacts (the sum of their sizes, their number); a result
	// that would exceed either is refused (ARTIFACT_QUOTA_EXCEEDED), never
	// truncated.
	ArtifactQuotaBytes int
	ArtifactQuotaCount int

	// FindTools offers the find_tools search tool (admission's
	// visible-set search) beside the visible set.
	FindTools bool

	// SamplingMaxTokens bounds the maxTokens of an upstream's
	// sampling/createMessage relayed to a client: a larger one is refused
	// to the upstream and logged, and the client is never asked. 0 means
	// no bound.
	SamplingMaxTokens int

	// AllowedOrigins is the comma-separated list of browser origins
	// (scheme://host[:port]) whose requests the MCP endpoint serves; a
	// request with another Origin header is refused 403, one without
	// passes. Empty allows none.
	AllowedOrigins string

	// Secrets confines the audience classes' secret references (upstream
	// credentials); Egress confines the upstreams the gateway dials.
	Secrets secretref.Config
	Egress  egress.Config

	// Ready, when set, is called with the MCP endpoint's URL once it
	// listens (tests and the dev launcher use port 0). Not a flag.
	Ready func(mcpURL string)
	// WrapMCP, when set, wraps the MCP endpoint's handler, outermost (the
	// benchmark labels the gateway's work for its CPU profile). Not a flag;
	// nil in production.
	WrapMCP func(http.Handler) http.Handler
	// ClientOptions, when set, are added to the admission and lease
	// clients' dial options (the benchmark times each Check and Issue as
	// the gateway sees them). Not a flag; nil in production.
	ClientOptions []grpc.DialOption
}

func flags(cfg *Config, lookup func(string) (string, bool)) *config.Set {
	s := config.NewSet("gateway", lookup)
	cfg.Common.Register(s, "gateway", config.Defaults{ListenAddr: DefaultListenAddr, MetricsAddr: DefaultMetricsAddr, UsesRedis: true})
	s.String(&cfg.MCPListen, "mcp-listen", "TOOLCRIB_GATEWAY_MCP_LISTEN", DefaultMCPListen, "MCP endpoint address (streamable HTTP, path /mcp); TLS with --tls-cert-file, without client certificates (MCP clients present bearer tokens)")
	s.String(&cfg.PublicURL, "public-url", "", "", "the MCP endpoint's URL as clients reach it; empty means http(s)://<mcp-listen>/mcp")
	s.String(&cfg.PeerURL, "peer-url", "", "", "the MCP endpoint's URL as the other gateway replicas reach this one directly (not through the balancer), advertised in Redis: a replica passes a session's requests to the replica holding it; empty means http(s)://<the listener's address>/mcp")
	s.String(&cfg.AuthorizationServer, "authorization-server", "", "", "OAuth issuer URL named in the protected-resource metadata, before the OpenID providers the services trust (--auth-discovery, --auth-issuers-file), which it names too; empty adds none")
	s.String(&cfg.AdmissionAddr, "admission-addr", "", "127.0.0.1:7103", "admission gRPC address (ListVisibleTools, Check; the client's token)")
	s.String(&cfg.LeaseAddr, "lease-addr", "", "127.0.0.1:7104", "lease gRPC address (Issue; the client's token)")
	s.String(&cfg.RegistryAddr, "registry-addr", "", "127.0.0.1:7101", "registry gRPC address (contracts, descriptors, servers; the service token)")
	s.String(&cfg.DiscoveryAddr, "discovery-addr", "", "127.0.0.1:7102", "discovery gRPC address (GetSnapshot: descriptors and output schemas; the service token)")
	s.String(&cfg.CursorKeyFile, "cursor-key-file", "", ".toolcrib/dev/gateway-cursor-key", "file with the key signing tools/list cursors, created when absent")
	s.Int(&cfg.PageSize, "page-size", "", 100, "tools per tools/list page")
	s.Duration(&cfg.ListTTL, "list-ttl", "", time.Second, "ttlMs hint of tools/list results (cacheScope private); list_changed tells listeners sooner")
	s.Duration(&cfg.WatchInterval, "watch-interval", "", time.Second, "how often a listening principal's visible set is re-read for list_changed")
	s.Duration(&cfg.IdleTimeout, "idle-timeout", "", 10*time.Minute, "how long a principal's last listing is kept after its last request")
	s.Int(&cfg.MaxSessionsPerPrincipal, "max-sessions-per-principal", "", 32, "open MCP sessions (clients initializing at 2025-11-25 or older) one principal may hold on one replica; an initialize past it is refused 429 until a session ends (DELETE) or idles out (--idle-timeout)")
	s.String(&cfg.LeaseAudiencePrefix, "lease-audience-prefix", "", "executor.", "prefix of the server id forming a lease's executor audience")
	s.String(&cfg.StdioCredentialEnv, "stdio-credential-env", "", "TOOLCRIB_UPSTREAM_TOKEN", "environment variable a stdio server gets its upstream credential in (the gateway starts registered stdio servers itself, as discovery does)")
	s.Duration(&cfg.DefaultDeadline, "default-deadline", "", 30*time.Second, "upstream deadline when the contract sets no deadline_ms")
	s.Duration(&cfg.ConfirmTTL, "confirm-ttl", "", 5*time.Minute, "how long a confirmation request stays answerable")
	s.String(&cfg.ConfirmerTokenFile, "confirmer-token-file", "", ".toolcrib/dev/confirmer-token", "file with the gateway's confirmer token (confirmer group of the platform tenant), presented beside the user's token when the user confirmed a call; re-read on change; empty: calls that need a confirmation are denied without asking")
	s.Int(&cfg.ResultBudget, "result-budget-bytes", "", 64<<10, "largest result given to the model inline when its contract sets no result_budget_bytes; larger ones become artifacts")
	s.Int(&cfg.PreviewBytes, "preview-bytes", "", 1024, "bytes of an artifact's head and of its tail in the preview")
	s.Duration(&cfg.ArtifactRetention, "artifact-retention", "", 24*time.Hour, "how long an artifact is kept")
	s.Int(&cfg.MaxArtifactBytes, "max-artifact-bytes", "", 64<<20, "largest result stored as an artifact; larger results are refused")
	s.Int(&cfg.ArtifactQuotaBytes, "artifact-quota-bytes", "", 1<<30, "bytes a tenant's unexpired artifacts may hold together; a result that would exceed it is refused (ARTIFACT_QUOTA_EXCEEDED)")
	s.Int(&cfg.ArtifactQuotaCount, "artifact-quota-count", "", 10000, "artifacts a tenant may hold unexpired; a result that would exceed it is refused (ARTIFACT_QUOTA_EXCEEDED)")
	s.Bool(&cfg.FindTools, "find-tools", "", false, "offer the find_tools search tool (visible-set search) so a host can load tools on demand")
	s.Int(&cfg.SamplingMaxTokens, "sampling-max-tokens", "", 4096, "largest maxTokens of an upstream's sampling/createMessage the gateway relays to a client (tools whose contract allows sampling); a larger one is refused to the upstream with JSON-RPC error -32602 and logged, and the client is never asked (at 2026-07-28, a sampling input request over it refuses the call SAMPLING_NOT_ALLOWED); 0 means no bound")
	s.String(&cfg.AllowedOrigins, "allowed-origins", "TOOLCRIB_GATEWAY_ALLOWED_ORIGINS", "", "comma-separated browser origins (scheme://host[:port]) the MCP endpoint serves besides loopback ones (localhost, 127.0.0.1, ::1); a request with any other Origin header is refused 403 before authentication, one without Origin (not a browser) passes; empty allows loopback origins only")
	cfg.Secrets.Register(s)
	cfg.Egress.Register(s)
	return s
}

// ParseConfig reads the configuration from args (flags) and lookup (the
// environment; nil means os.LookupEnv): flag, then environment variable,
// then default. It reports every problem at once; -h gives flag.ErrHelp.
func ParseConfig(args []string, lookup func(string) (string, bool)) (Config, error) {
	return config.Parse(args, lookup, flags)
}

// Usage returns the help text of the gateway's flags.
func Usage() string { return config.Usage(flags) }

// Flags describes the gateway's flags in registration order; `make docs`
// writes docs/config/gateway.md from it.
func Flags() []config.Flag { return config.Describe(flags) }

// Validate reports every problem with the configuration.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate()}
	bad := config.Problems(&errs)
	for name, addr := range map[string]string{"mcp-listen": c.MCPListen, "admission-addr": c.AdmissionAddr,
		"lease-addr": c.LeaseAddr, "registry-addr": c.RegistryAddr, "discovery-addr": c.DiscoveryAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			bad(name, "%q is not host:port", addr)
		}
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("public-url", "must be an http(s) URL")
		}
	}
	if c.PeerURL != "" {
		if u, err := url.Parse(c.PeerURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("peer-url", "must be an http(s) URL")
		}
	}
	if c.AuthorizationServer != "" {
		if u, err := url.Parse(c.AuthorizationServer); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("authorization-server", "must be an http(s) URL")
		}
	}
	if _, err := c.Origins(); err != nil {
		bad("allowed-origins", "%v", err)
	}
	if c.CursorKeyFile == "" {
		bad("cursor-key-file", "required")
	}
	if c.PageSize < 1 || c.PageSize > 1000 {
		bad("page-size", "must be in [1, 1000]")
	}
	if c.MaxSessionsPerPrincipal < 1 || c.MaxSessionsPerPrincipal > 10000 {
		bad("max-sessions-per-principal", "must be in [1, 10000]")
	}
	if c.ListTTL < 0 {
		bad("list-ttl", "must not be negative")
	}
	for name, d := range map[string]time.Duration{"watch-interval": c.WatchInterval, "idle-timeout": c.IdleTimeout,
		"default-deadline": c.DefaultDeadline, "confirm-ttl": c.ConfirmTTL, "artifact-retention": c.ArtifactRetention} {
		if d <= 0 {
			bad(name, "must be positive")
		}
	}
	if c.ResultBudget < 1024 {
		bad("result-budget-bytes", "at least 1024")
	}
	if c.PreviewBytes < 0 || 2*c.PreviewBytes > c.ResultBudget {
		bad("preview-bytes", "must be in [0, result-budget-bytes/2]")
	}
	if c.MaxArtifactBytes < c.ResultBudget {
		bad("max-artifact-bytes", "must be at least result-budget-bytes")
	}
	if c.MaxArtifactBytes > MaxArtifactBytesLimit {
		bad("max-artifact-bytes", "at most %d (a result is held in memory while it is stored)", MaxArtifactBytesLimit)
	}
	if c.ArtifactQuotaBytes < c.MaxArtifactBytes {
		bad("artifact-quota-bytes", "must be at least max-artifact-bytes (else the largest artifact could never be stored)")
	}
	if c.SamplingMaxTokens < 0 {
		bad("sampling-max-tokens", "must not be negative (0 means no bound)")
	}
	if c.ArtifactQuotaCount < 1 {
		bad("artifact-quota-count", "must be positive")
	}
	if c.Redis().URL == "" {
		bad("redis-url", "required: confirmations are kept in Redis")
	}
	if _, err := c.Secrets.Policy(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Egress.Policy(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// mcpURL is the endpoint's public URL given the address it listens on:
// https when the listener serves TLS (--tls-cert-file).
func (c *Config) mcpURL(listening string) string {
	if c.PublicURL != "" {
		return c.PublicURL
	}
	if c.TLS.ServerEnabled() {
		return "https://" + listening + MCPPath
	}
	return "http://" + listening + MCPPath
}

// Origins is --allowed-origins as a list; each is an http(s) origin:
// scheme and host (and port), nothing else.
func (c *Config) Origins() ([]string, error) {
	var out []string
	for _, o := range strings.Split(c.AllowedOrigins, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
			if len(o) > 100 {
				o = o[:100] + "…"
			}
			return nil, fmt.Errorf("%q is not an origin (scheme://host[:port])", o)
		}
		out = append(out, o)
	}
	return out, nil
}
