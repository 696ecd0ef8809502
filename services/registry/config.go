package registry

import (
	"errors"
	"net"
	"time"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/egress"
	"github.com/toolcrib/toolcrib/platform/secretref"
)

// Default addresses (DESIGN §10).
const (
	DefaultListenAddr    = "127.0.0.1:7101"
	DefaultMetricsAddr   = "127.0.0.1:9101"
	DefaultDiscoveryAddr = "127.0.0.1:7102"
)

// Config is the registry's configuration.
type Config struct {
	config.Common

	// DiscoveryAddr is the discovery service's gRPC address; the registry
	// follows its Watch to learn the tools discovery commits. Empty disables
	// the loop (no tool then ever appears).
	DiscoveryAddr string
	// WatchHeartbeat is the interval of Watch heartbeats.
	WatchHeartbeat time.Duration
	// WatchRetention is how long changes are kept for Watch resumption.
	WatchRetention time.Duration
	// WatchKeep is how many of the newest changes are kept whatever their
	// age.
	WatchKeep int
	// CompactInterval is how often old changes are deleted.
	CompactInterval time.Duration
	// Egress is the policy a registered server's URL must pass
	// (--egress-allow-*).
	Egress egress.Config
	// Secrets is the policy an audience class's secret references must
	// pass (--secret-dirs, --secret-env-prefixes).
	Secrets secretref.Config
}

func flags(cfg *Config, lookup func(string) (string, bool)) *config.Set {
	s := config.NewSet("registry", lookup)
	cfg.Common.Register(s, "registry", config.Defaults{ListenAddr: DefaultListenAddr, MetricsAddr: DefaultMetricsAddr})
	s.String(&cfg.DiscoveryAddr, "discovery-addr", "", DefaultDiscoveryAddr,
		"discovery gRPC address whose Watch feeds the tools it commits; empty disables following discovery")
	s.Duration(&cfg.WatchHeartbeat, "watch-heartbeat", "", time.Second, "interval of Watch heartbeats")
	s.Duration(&cfg.WatchRetention, "watch-retention", "", 24*time.Hour, "how long changes are kept for Watch clients to resume from")
	s.Int(&cfg.WatchKeep, "watch-keep", "", 10_000, "how many of the newest changes are kept whatever their age")
	s.Duration(&cfg.CompactInterval, "watch-compact-interval", "", time.Minute, "how often changes past the retention are deleted")
	cfg.Egress.Register(s)
	cfg.Secrets.Register(s)
	return s
}

// ParseConfig reads the configuration from args (flags) and lookup (the
// environment; nil means os.LookupEnv): flag, then environment variable,
// then default. It reports every problem at once; -h gives flag.ErrHelp.
func ParseConfig(args []string, lookup func(string) (string, bool)) (Config, error) {
	return config.Parse(args, lookup, flags)
}

// Usage returns the help text of the registry's flags.
func Usage() string { return config.Usage(flags) }

// Flags describes the registry's flags in registration order; `make docs`
// writes docs/config/registry.md from it.
func Flags() []config.Flag { return config.Describe(flags) }

// Validate reports every problem with the configuration.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate()}
	bad := config.Problems(&errs)
	if c.DiscoveryAddr != "" {
		if _, _, err := net.SplitHostPort(c.DiscoveryAddr); err != nil {
			bad("discovery-addr", "%q is not host:port", c.DiscoveryAddr)
		}
		if c.ServiceTokenFile == "" && c.TLS.ClientCertFile == "" {
			bad("service-token-file", "required while --discovery-addr is set (or --tls-client-cert-file): the registry presents that token to discovery")
		}
	}
	if c.WatchHeartbeat <= 0 {
		bad("watch-heartbeat", "must be positive")
	}
	if c.WatchRetention <= 0 {
		bad("watch-retention", "must be positive")
	}
	if c.WatchKeep < 0 {
		bad("watch-keep", "must not be negative")
	}
	if c.CompactInterval <= 0 {
		bad("watch-compact-interval", "must be positive")
	}
	if _, err := c.Egress.Policy(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Secrets.Policy(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
