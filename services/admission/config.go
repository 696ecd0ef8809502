package admission

import (
	"errors"
	"net"
	"time"

	"github.com/toolcrib/toolcrib/platform/config"
)

// Default addresses (DESIGN §10).
const (
	DefaultListenAddr    = "127.0.0.1:7103"
	DefaultMetricsAddr   = "127.0.0.1:9103"
	DefaultRegistryAddr  = "127.0.0.1:7101"
	DefaultDiscoveryAddr = "127.0.0.1:7102"
)

// Config is admission's configuration.
type Config struct {
	config.Common

	// RegistryAddr and DiscoveryAddr are the gRPC addresses whose Watch
	// streams and reads feed the replica; both required.
	RegistryAddr, DiscoveryAddr string
	// ValidityWindow is how old the newest heartbeat of either stream may be
	// before every Check answers STALE_POLICY (I8).
	ValidityWindow time.Duration
	// CacheTTL bounds a cached decision's lifetime.
	CacheTTL time.Duration
	// L1Size is the most decisions cached in process.
	L1Size int
	// MaxArgumentBytes caps one call's arguments.
	MaxArgumentBytes int
	// ReceiptBatch and ReceiptInterval shape the receipt writer.
	ReceiptBatch    int
	ReceiptInterval time.Duration
	// ReceiptMissWait is how long GetReceipt keeps re-reading Postgres for a
	// receipt it cannot find (one another replica decided and has not
	// stored yet) before NOT_FOUND; zero means 3 × ReceiptInterval.
	ReceiptMissWait time.Duration
	// ReceiptRecent is the most stored ALLOW receipts GetReceipt answers
	// from memory.
	ReceiptRecent int
	// RunTTL is how long a run binds its generation (I11).
	RunTTL time.Duration
	// ReceiptKeyFile, ReceiptKeyRotateEvery and ReceiptKeyCheckInterval
	// are the key source of the ALLOW receipts' signing keys: the lease
	// service's key options (config.KeyFlags) under the prefix "receipt-".
	// Replicas behind one address must share one key file; empty
	// ReceiptKeyFile keeps the keys in memory (one replica only; logged).
	ReceiptKeyFile                                 string
	ReceiptKeyRotateEvery, ReceiptKeyCheckInterval time.Duration
	// AuditRate is the share of ALLOWs answered from the decision cache
	// that are re-decided from direct reads; one the re-check denies is
	// reported to discovery's rollout guard. 0 turns the auditor off.
	AuditRate float64
	// ConditionClock is the time a grant's condition reads as
	// `request.time`; nil reads the decision time. Not a flag: tests set
	// it to decide a time window at any hour without sleeping to it.
	ConditionClock func() time.Time
}

func flags(cfg *Config, lookup func(string) (string, bool)) *config.Set {
	s := config.NewSet("admission", lookup)
	cfg.Common.Register(s, "admission", config.Defaults{ListenAddr: DefaultListenAddr, MetricsAddr: DefaultMetricsAddr, UsesRedis: true, Confirms: true})
	s.String(&cfg.RegistryAddr, "registry-addr", "", DefaultRegistryAddr, "registry gRPC address (Watch, GetPolicy, GetToolReview)")
	s.String(&cfg.DiscoveryAddr, "discovery-addr", "", DefaultDiscoveryAddr, "discovery gRPC address (Watch, GetSnapshot, GetActiveSnapshot, BindGeneration)")
	s.Duration(&cfg.ValidityWindow, "validity-window", "", 5*time.Second, "newest heartbeat age of either Watch stream past which every Check answers STALE_POLICY")
	s.Duration(&cfg.CacheTTL, "cache-ttl", "", time.Minute, "lifetime of a cached decision")
	s.Int(&cfg.L1Size, "cache-l1-size", "", 100_000, "decisions cached in process")
	s.Int(&cfg.MaxArgumentBytes, "max-argument-bytes", "", 64<<10, "largest arguments document of one call")
	s.Int(&cfg.ReceiptBatch, "receipt-batch", "", 500, "receipts written per batch")
	s.Duration(&cfg.ReceiptInterval, "receipt-interval", "", 50*time.Millisecond, "longest wait before a receipt batch is written")
	s.Duration(&cfg.ReceiptMissWait, "receipt-miss-wait", "", 0, "how long GetReceipt re-reads Postgres for a receipt not found (another replica's, not stored yet) before NOT_FOUND; 0 means 3 x receipt-interval")
	s.Int(&cfg.ReceiptRecent, "receipt-recent", "", 100_000, "stored ALLOW receipts GetReceipt answers from memory (within the lookup window)")
	s.Duration(&cfg.RunTTL, "run-ttl", "", time.Hour, "how long a run binds the generation it was checked against")
	cfg.receiptKeyFlags().Register(s, "receipt-", "ALLOW receipts")
	s.Float64(&cfg.AuditRate, "audit-rate", "", 0.01, "share of cached ALLOWs re-decided from direct reads off the request path; a denial is reported to discovery's rollout guard (0 turns it off)")
	return s
}

// receiptKeyFlags are the receipt-signing key options, the lease
// service's key options under the prefix "receipt-".
func (c *Config) receiptKeyFlags() config.KeyFlags {
	return config.KeyFlags{File: &c.ReceiptKeyFile, RotateEvery: &c.ReceiptKeyRotateEvery, CheckInterval: &c.ReceiptKeyCheckInterval,
		WithoutFile: "keys in memory, for a single replica only (replicas behind one address share one file)"}
}

// ParseConfig reads the configuration from args (flags) and lookup (the
// environment; nil means os.LookupEnv): flag, then environment variable,
// then default. It reports every problem at once; -h gives flag.ErrHelp.
func ParseConfig(args []string, lookup func(string) (string, bool)) (Config, error) {
	return config.Parse(args, lookup, flags)
}

// Usage returns the help text of admission's flags.
func Usage() string { return config.Usage(flags) }

// Flags describes admission's flags in registration order; `make docs`
// writes docs/config/admission.md from it.
func Flags() []config.Flag { return config.Describe(flags) }

// Validate reports every problem with the configuration.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate()}
	bad := config.Problems(&errs)
	for name, addr := range map[string]string{"registry-addr": c.RegistryAddr, "discovery-addr": c.DiscoveryAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			bad(name, "must be host:port")
		}
	}
	if c.ServiceTokenFile == "" && c.TLS.ClientCertFile == "" {
		bad("service-token-file", "required unless --tls-client-cert-file identifies admission: admission presents it to the registry and discovery")
	}
	if c.Redis().URL == "" {
		bad("redis-url", "required: the decision cache's L2")
	}
	if c.ValidityWindow <= 0 {
		bad("validity-window", "must be positive")
	}
	if !(c.AuditRate >= 0 && c.AuditRate <= 1) {
		bad("audit-rate", "must be in [0, 1]")
	}
	if c.CacheTTL <= 0 {
		bad("cache-ttl", "must be positive")
	}
	if c.L1Size <= 0 {
		bad("cache-l1-size", "must be positive")
	}
	if c.MaxArgumentBytes <= 0 || c.MaxArgumentBytes > 4<<20 {
		bad("max-argument-bytes", "must be 1..4194304")
	}
	if c.ReceiptBatch <= 0 {
		bad("receipt-batch", "must be positive")
	}
	if c.ReceiptInterval <= 0 {
		bad("receipt-interval", "must be positive")
	}
	if c.ReceiptMissWait < 0 {
		bad("receipt-miss-wait", "must not be negative")
	}
	if c.ReceiptRecent <= 0 {
		bad("receipt-recent", "must be positive")
	}
	c.receiptKeyFlags().Validate(bad, "receipt-")
	if c.RunTTL <= 0 {
		bad("run-ttl", "must be positive")
	}
	return errors.Join(errs...)
}
