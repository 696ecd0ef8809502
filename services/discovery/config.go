package discovery

import (
	"errors"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/egress"
	"github.com/toolcrib/toolcrib/platform/secretref"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
)

// Config is discovery's configuration.
type Config struct {
	config.Common

	// RegistryAddr is the registry's gRPC address.
	RegistryAddr string
	// AdmissionAddr is admission's gRPC address, for the rollout guard's
	// missing-tool rate (SummarizeDecisions); empty turns that rule off.
	AdmissionAddr string
	// Guard runs the rollout guard (automatic rollback) every
	// GuardInterval: it rolls a pointer back (or closes it) when the
	// missing-tool rate of its generation over the last GuardWindow is
	// above GuardMissingRate with at least GuardMinChecks Checks, or at
	// one reported unauthorized event.
	Guard            bool
	GuardInterval    time.Duration
	GuardWindow      time.Duration
	GuardMissingRate float64
	GuardMinChecks   int
	// Workers is how many scans run at once in this process.
	Workers int
	// ScanTimeout bounds one scan; RescueAfter is when a scan whose worker
	// vanished is retried by another (must exceed ScanTimeout).
	ScanTimeout time.Duration
	RescueAfter time.Duration
	// RefreshInterval is the default time between scans of a server (a
	// server's scan_interval overrides it); RefreshTick is how often due
	// scans are looked for.
	RefreshInterval time.Duration
	RefreshTick     time.Duration
	// RetryBase, RetryMax and MaxAttempts shape retries of INCOMPLETE scans.
	RetryBase   time.Duration
	RetryMax    time.Duration
	MaxAttempts int
	// SnapshotTTL is how long a snapshot proves its catalog.
	SnapshotTTL time.Duration
	// Linger keeps an MCP session open after a commit to hear a late
	// list_changed; 0 disables it.
	Linger time.Duration
	// MaxPages, MaxTools and MaxBytes cap one scan.
	MaxPages int
	MaxTools int
	MaxBytes int
	// ConnectTimeout and PageTimeout bound MCP calls.
	ConnectTimeout time.Duration
	PageTimeout    time.Duration
	// TLSCAFile adds PEM roots for https MCP servers
	// (--upstream-tls-ca-file; --tls-ca-file is the roots of the gRPC
	// clients, platform/tlsconfig).
	TLSCAFile string
	// AllowInsecureHTTP allows plain http to non-loopback MCP servers.
	AllowInsecureHTTP bool
	// MinProtocolVersion is the oldest MCP version accepted.
	MinProtocolVersion string
	// CredentialEnv names the variable a stdio server gets its credential in.
	CredentialEnv string
	// MaxToolBytes, MaxSchemaBytes and MaxSchemaDepth bound each tool.
	MaxToolBytes   int
	MaxSchemaBytes int
	MaxSchemaDepth int
	// WatchHeartbeat is the Watch heartbeat interval.
	WatchHeartbeat time.Duration
	// RetentionInterval, RetentionGrace and ChangeLogRetention drive the
	// retention sweep.
	RetentionInterval  time.Duration
	RetentionGrace     time.Duration
	ChangeLogRetention time.Duration
	// RunRetention is how long finished runs are kept (those that produced
	// a retained snapshot stay with it).
	RunRetention time.Duration
	// FetchCooldown is the job queue's minimum time between fetches.
	FetchCooldown time.Duration
	// MaxListeners bounds this process's listening connections (one per
	// server and audience class that declared tools.listChanged); 0
	// disables listening.
	MaxListeners int
	// NotifyMinInterval is the least time between two notification-
	// triggered scans of a server and class; it doubles while they find
	// nothing new, up to NotifyMaxInterval.
	NotifyMinInterval time.Duration
	NotifyMaxInterval time.Duration
	// ListenSweep is how often a process looks for pairs to listen to.
	ListenSweep time.Duration
	// Egress is where MCP servers may be connected to, checked on every
	// resolved address at dial time (--egress-allow-*).
	Egress egress.Config
	// Secrets confines the secret references resolved at scan time
	// (--secret-dirs, --secret-env-prefixes).
	Secrets secretref.Config

	// Registry, when set, is used instead of dialing RegistryAddr (tests and
	// benchmarks in one process). Not a flag.
	Registry registryclient.Registry
	// LookupEnv resolves `env:` secret references; nil means the process
	// environment. Not a flag.
	LookupEnv func(string) (string, bool)
	// Worker names this process in run records; empty means `host:pid`.
	// Not a flag.
	Worker string
	// Metrics receives the scanner's Prometheus metrics; nil means the
	// service's metrics registry. Not a flag.
	Metrics prometheus.Registerer
	// NoAutoScans stops the process from queueing scans by itself (registry
	// watch, periodic refresh): only TriggerScan and list_changed queue
	// scans. For tests and benchmarks that drive every scan. Not a flag.
	NoAutoScans bool
	// GuardPassed, when set, is called after each rollout-guard pass this
	// process runs (tests wait for passes instead of the clock). Not a flag.
	GuardPassed func()
}

// ParseConfig reads the configuration from args (flags) and lookup (the
// environment; nil means os.LookupEnv): flag, then environment variable,
// then default. It reports every problem at once; -h gives flag.ErrHelp.
func ParseConfig(args []string, lookup func(string) (string, bool)) (Config, error) {
	return config.Parse(args, lookup, flags)
}

// Usage returns the help text of discovery's flags.
func Usage() string { return config.Usage(flags) }

// Flags describes discovery's flags in registration order; `make docs`
// writes docs/config/discovery.md from it.
func Flags() []config.Flag { return config.Describe(flags) }

func flags(c *Config, lookup func(string) (string, bool)) *config.Set {
	s := config.NewSet("discovery", lookup)
	c.Common.Register(s, "discovery", config.Defaults{ListenAddr: "127.0.0.1:7102", MetricsAddr: "127.0.0.1:9102"})
	s.String(&c.RegistryAddr, "registry-addr", "", "127.0.0.1:7101", "registry gRPC address")
	s.String(&c.AdmissionAddr, "admission-addr", "", "127.0.0.1:7103", "admission gRPC address (the rollout guard's missing-tool rate; the service token); empty turns that rule off")
	s.Bool(&c.Guard, "guard", "", true, "run the rollout guard: automatic rollback on a missing-tool rate or an unauthorized event")
	s.Duration(&c.GuardInterval, "guard-interval", "", 2*time.Second, "how often the rollout guard looks at every active pointer")
	s.Duration(&c.GuardWindow, "guard-window", "", 5*time.Minute, "how far back the missing-tool rate looks (never before the generation became active or the pair was resumed)")
	s.Float64(&c.GuardMissingRate, "guard-missing-rate", "", 0.05, "missing-tool rate (Checks answered STALE_CATALOG or NOT_FOUND for a tool of the previous generation, over all Checks of the active one) above which the guard rolls back")
	s.Int(&c.GuardMinChecks, "guard-min-checks", "", 20, "fewest Checks in the window before the missing-tool rate counts")
	s.Int(&c.Workers, "workers", "", 16, "scans run at once by this process (a scan holds a pooled Postgres connection only while it runs a statement, and the pair locks of all of them share one session; the pool allows 2 × workers + 8 connections)")
	s.Duration(&c.ScanTimeout, "scan-timeout", "", 5*time.Minute, "longest one scan may take")
	s.Duration(&c.RescueAfter, "rescue-after", "", 6*time.Minute, "when a scan whose worker vanished is retried by another (must exceed --scan-timeout)")
	s.Duration(&c.RefreshInterval, "refresh-interval", "", 15*time.Minute, "default time between scans of a server (its scan_interval overrides it)")
	s.Duration(&c.RefreshTick, "refresh-tick", "", time.Minute, "how often servers due for a scan are looked for")
	s.Duration(&c.RetryBase, "retry-base", "", time.Second, "first retry delay of an incomplete scan (doubles per attempt)")
	s.Duration(&c.RetryMax, "retry-max", "", 5*time.Minute, "longest retry delay")
	s.Int(&c.MaxAttempts, "max-attempts", "", 10, "attempts of one scan before it waits for the next refresh")
	s.Duration(&c.SnapshotTTL, "snapshot-ttl", "", time.Hour, "how long a snapshot proves its catalog without a rescan")
	s.Duration(&c.Linger, "linger", "", 5*time.Second, "how long an MCP session stays open after a commit to hear list_changed; 0 disables")
	s.Int(&c.MaxPages, "max-pages", "", 10_000, "most tools/list pages in one scan")
	s.Int(&c.MaxTools, "max-tools", "", 250_000, "most tools in one scan")
	s.Int(&c.MaxBytes, "max-bytes", "", 512<<20, "most bytes of tools/list results in one scan")
	s.Duration(&c.ConnectTimeout, "connect-timeout", "", 30*time.Second, "bound on connecting and initializing an MCP session")
	s.Duration(&c.PageTimeout, "page-timeout", "", 30*time.Second, "bound on one tools/list call")
	s.String(&c.TLSCAFile, "upstream-tls-ca-file", "", "", "PEM file with extra roots for https MCP servers (toolcrib's own gRPC clients use --tls-ca-file)")
	s.Bool(&c.AllowInsecureHTTP, "allow-insecure-http", "", false, "allow plain http to MCP servers that are not on loopback")
	s.String(&c.MinProtocolVersion, "min-protocol-version", "", "2025-06-18", "oldest MCP protocol version accepted")
	s.String(&c.CredentialEnv, "stdio-credential-env", "", "TOOLCRIB_UPSTREAM_TOKEN", "environment variable a stdio server gets its upstream credential in")
	s.Int(&c.MaxToolBytes, "max-tool-bytes", "", 256<<10, "largest raw tool object")
	s.Int(&c.MaxSchemaBytes, "max-schema-bytes", "", 64<<10, "largest canonical input or output schema")
	s.Int(&c.MaxSchemaDepth, "max-schema-depth", "", 32, "deepest JSON nesting of a schema")
	s.Duration(&c.WatchHeartbeat, "watch-heartbeat", "", time.Second, "Watch heartbeat interval")
	s.Duration(&c.RetentionInterval, "retention-interval", "", 10*time.Minute, "how often unused generations are deleted")
	s.Duration(&c.RetentionGrace, "retention-grace", "", 24*time.Hour, "how long an expired, unbound, inactive generation is kept")
	s.Duration(&c.ChangeLogRetention, "changelog-retention", "", 24*time.Hour, "how long Watch history is kept")
	s.Duration(&c.RunRetention, "run-retention", "", 7*24*time.Hour, "how long finished runs are kept (runs of retained snapshots stay)")
	s.Duration(&c.FetchCooldown, "fetch-cooldown", "", 20*time.Millisecond, "shortest time between job fetches")
	s.Int(&c.MaxListeners, "max-listeners", "", 256, "listening connections this process keeps for list_changed (one per server and class that declared it); 0 disables")
	s.Duration(&c.ListenSweep, "listen-sweep", "", 5*time.Second, "how often a process looks for servers to listen to")
	s.Duration(&c.NotifyMinInterval, "notify-min-interval", "", time.Second, "least time between two list_changed-triggered scans of a server and class (doubles while they find nothing new)")
	s.Duration(&c.NotifyMaxInterval, "notify-max-interval", "", 5*time.Minute, "longest rate-limit delay of a list_changed-triggered scan")
	c.Egress.Register(s)
	c.Secrets.Register(s)
	return s
}

// Validate reports every problem with the configuration.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate()}
	bad := config.Problems(&errs)
	if c.Registry == nil {
		if _, _, err := net.SplitHostPort(c.RegistryAddr); err != nil {
			bad("registry-addr", "%q is not host:port", c.RegistryAddr)
		}
	}
	positive := map[string]time.Duration{"scan-timeout": c.ScanTimeout, "refresh-interval": c.RefreshInterval,
		"refresh-tick": c.RefreshTick, "retry-base": c.RetryBase, "retry-max": c.RetryMax, "snapshot-ttl": c.SnapshotTTL,
		"connect-timeout": c.ConnectTimeout, "page-timeout": c.PageTimeout, "watch-heartbeat": c.WatchHeartbeat,
		"retention-interval": c.RetentionInterval, "changelog-retention": c.ChangeLogRetention, "fetch-cooldown": c.FetchCooldown,
		"run-retention": c.RunRetention, "notify-min-interval": c.NotifyMinInterval, "notify-max-interval": c.NotifyMaxInterval,
		"listen-sweep": c.ListenSweep}
	for _, name := range []string{"scan-timeout", "refresh-interval", "refresh-tick", "retry-base", "retry-max", "snapshot-ttl",
		"connect-timeout", "page-timeout", "watch-heartbeat", "retention-interval", "changelog-retention", "fetch-cooldown", "run-retention",
		"notify-min-interval", "notify-max-interval", "listen-sweep"} {
		if positive[name] <= 0 {
			bad(name, "must be positive")
		}
	}
	if c.RescueAfter <= c.ScanTimeout {
		bad("rescue-after", "must exceed --scan-timeout (%s)", c.ScanTimeout)
	}
	if c.Linger < 0 || c.RetentionGrace < 0 {
		bad("linger", "--linger and --retention-grace must not be negative")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"workers", c.Workers}, {"max-attempts", c.MaxAttempts}, {"max-pages", c.MaxPages}, {"max-tools", c.MaxTools},
		{"max-bytes", c.MaxBytes}, {"max-tool-bytes", c.MaxToolBytes}, {"max-schema-bytes", c.MaxSchemaBytes},
		{"max-schema-depth", c.MaxSchemaDepth}} {
		if f.v <= 0 {
			bad(f.name, "must be positive")
		}
	}
	if c.AdmissionAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdmissionAddr); err != nil {
			bad("admission-addr", "%q is not host:port", c.AdmissionAddr)
		}
	}
	if c.GuardInterval <= 0 || c.GuardWindow <= 0 {
		bad("guard-interval", "--guard-interval and --guard-window must be positive")
	}
	if !(c.GuardMissingRate >= 0 && c.GuardMissingRate < 1) {
		bad("guard-missing-rate", "must be in [0, 1)")
	}
	if c.GuardMinChecks < 1 {
		bad("guard-min-checks", "must be at least 1")
	}
	if c.MaxListeners < 0 {
		bad("max-listeners", "must not be negative")
	}
	if c.NotifyMaxInterval < c.NotifyMinInterval {
		bad("notify-max-interval", "must not be below --notify-min-interval (%s)", c.NotifyMinInterval)
	}
	if c.Workers > 1000 {
		bad("workers", "at most 1000")
	}
	if _, err := c.Egress.Policy(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Secrets.Policy(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
