package lease

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/admissionview"
)

// Default addresses (DESIGN §10).
const (
	DefaultListenAddr  = "127.0.0.1:7104"
	DefaultMetricsAddr = "127.0.0.1:9104"
)

// Config is the lease service's configuration.
type Config struct {
	config.Common

	// KeyFile is the signing-key file (created with a first key when
	// absent; mode 0600). Required unless KeySource is set.
	KeyFile string
	// KeyRotateEvery is the age at which the signing key is replaced; 0
	// disables scheduled rotation.
	KeyRotateEvery time.Duration
	// KeyCheckInterval is how often keys are reloaded (another replica's
	// rotation), rotated when due, and expired ones destroyed.
	KeyCheckInterval time.Duration
	// Skew is the clock-skew allowance of Verify on `exp` and proof `iat`.
	Skew time.Duration
	// ProofWindow is how old a holder proof may be.
	ProofWindow time.Duration
	// Issuer is the `iss` of leases.
	Issuer string
	// AdmissionAddr is admission's gRPC address, for Issue by
	// `signed_receipt` (admission's receipt keys, GetSigningKeys, fetched
	// and cached), with an inline `check`, and by `receipt_id`
	// (AdmissionService.GetReceipt, the caller's credential forwarded);
	// empty refuses them unless ReceiptKeys or Receipts is set.
	AdmissionAddr string

	// RegistryAddr and DiscoveryAddr are the services whose Watch streams
	// the lease follows (policy epochs, active pointers, automatic freezes
	// on ROLLBACK and CLOSE); both empty turns that off (logged at start).
	RegistryAddr, DiscoveryAddr string
	// ValidityWindow is the newest heartbeat age of either stream past
	// which Verify fails closed (UNAVAILABLE STALE_POLICY).
	ValidityWindow time.Duration
	// RedeemAudiences binds Redeem to executors: comma-separated
	// `identity=audience` pairs, identity a toolcrib service's subject
	// (its SPIFFE id under mTLS, its token's sub otherwise); a service
	// may redeem only leases whose audience is paired with it. Empty: any
	// toolcrib service may redeem any lease (logged at start).
	RedeemAudiences string

	// Receipts, when set, replaces admission's receipt lookup for Issue by
	// `receipt_id` (tests); nil uses GetReceipt at AdmissionAddr. Not a flag.
	Receipts admissionview.ReceiptSource
	// ReceiptKeys, when set, replaces admission's GetSigningKeys as the
	// source of the keys signed receipts are verified with (tests); nil
	// uses AdmissionAddr. Not a flag.
	ReceiptKeys admissionview.KeyFetcher
	// Freshness is the Watch follower's view for Verify; nil skips the
	// epoch and generation check (logged at start). Not a flag.
	Freshness admissionview.Freshness
	// Extra registers more services on the lease service's gRPC server,
	// behind the same interceptors, with the service's Postgres pool and
	// Redis client: the lease benchmark's floor handlers (e2e/bench), which
	// do the least work each RPC's rules require. Not a flag; nil in
	// production.
	Extra func(s *grpc.Server, d *service.Deps)
}

func flags(cfg *Config, lookup func(string) (string, bool)) *config.Set {
	s := config.NewSet("lease", lookup)
	cfg.Common.Register(s, "lease", config.Defaults{ListenAddr: DefaultListenAddr, MetricsAddr: DefaultMetricsAddr, UsesRedis: true})
	cfg.keyFlags().Register(s, "", "leases")
	s.Duration(&cfg.Skew, "lease-skew", "", lease.DefaultSkew, "clock-skew allowance of Verify on exp and on a proof's iat")
	s.Duration(&cfg.ProofWindow, "proof-window", "", lease.DefaultProofWindow, "how old a holder proof may be")
	s.String(&cfg.Issuer, "lease-issuer", "", "toolcrib-lease", "iss claim of leases")
	s.String(&cfg.AdmissionAddr, "admission-addr", "", "", "admission gRPC address for Issue: the keys signed receipts are verified with (GetSigningKeys, cached), an inline check, or a receipt_id through GetReceipt; empty refuses all three")
	s.String(&cfg.RegistryAddr, "registry-addr", "", "127.0.0.1:7101", "registry gRPC address (Watch, GetPolicy); empty with --discovery-addr empty turns the epoch and generation check off")
	s.String(&cfg.DiscoveryAddr, "discovery-addr", "", "127.0.0.1:7102", "discovery gRPC address (Watch, GetActiveSnapshot); a ROLLBACK or CLOSE seen there freezes issuance for the server")
	s.Duration(&cfg.ValidityWindow, "validity-window", "", 5*time.Second, "newest heartbeat age of either Watch stream past which Verify answers STALE_POLICY")
	s.String(&cfg.RedeemAudiences, "redeem-audiences", "", "", "comma-separated identity=audience pairs: a toolcrib service (its SPIFFE id, or its token's sub) may Redeem only leases of the audiences paired with it; empty lets any toolcrib service Redeem any lease")
	return s
}

// ParseConfig reads the configuration from args (flags) and lookup (the
// environment; nil means os.LookupEnv): flag, then environment variable,
// then default. It reports every problem at once; -h gives flag.ErrHelp.
func ParseConfig(args []string, lookup func(string) (string, bool)) (Config, error) {
	return config.Parse(args, lookup, flags)
}

// keyFlags are the key-source options, shared with admission's receipt
// keys.
func (c *Config) keyFlags() config.KeyFlags {
	return config.KeyFlags{File: &c.KeyFile, RotateEvery: &c.KeyRotateEvery, CheckInterval: &c.KeyCheckInterval}
}

// Usage returns the help text of the lease service's flags.
func Usage() string { return config.Usage(flags) }

// Flags describes the lease service's flags in registration order; `make docs`
// writes docs/config/lease.md from it.
func Flags() []config.Flag { return config.Describe(flags) }

// Validate reports every problem with the configuration.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate()}
	bad := config.Problems(&errs)
	c.keyFlags().Validate(bad, "")
	if c.Skew <= 0 || c.Skew > lease.MaxSkew {
		bad("lease-skew", "must be in (0, %s]", lease.MaxSkew)
	}
	if c.ProofWindow <= 0 || c.ProofWindow > lease.MaxTTL {
		bad("proof-window", "must be in (0, %s]", lease.MaxTTL)
	}
	if c.Redis().URL == "" {
		bad("redis-url", "required: single use is recorded in Redis")
	}
	if c.AdmissionAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdmissionAddr); err != nil {
			bad("admission-addr", "%q is not host:port", c.AdmissionAddr)
		}
	}
	if (c.RegistryAddr == "") != (c.DiscoveryAddr == "") {
		bad("registry-addr", "set both --registry-addr and --discovery-addr, or neither")
	}
	for name, addr := range map[string]string{"registry-addr": c.RegistryAddr, "discovery-addr": c.DiscoveryAddr} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			bad(name, "%q is not host:port", addr)
		}
	}
	if _, err := ParseRedeemAudiences(c.RedeemAudiences); err != nil {
		bad("redeem-audiences", "%v", err)
	}
	if c.RegistryAddr != "" && c.ValidityWindow <= 0 {
		bad("validity-window", "must be positive")
	}
	return errors.Join(errs...)
}

// ParseRedeemAudiences reads --redeem-audiences: comma-separated
// `identity=audience` pairs (an identity may have several). Empty gives
// nil: any toolcrib service may redeem any lease.
func ParseRedeemAudiences(v string) (map[string]map[string]bool, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	out := map[string]map[string]bool{}
	for _, pair := range strings.Split(v, ",") {
		identity, audience, ok := strings.Cut(strings.TrimSpace(pair), "=")
		identity, audience = strings.TrimSpace(identity), strings.TrimSpace(audience)
		if !ok || identity == "" || audience == "" {
			return nil, fmt.Errorf("%q is not identity=audience", pair)
		}
		if out[identity] == nil {
			out[identity] = map[string]bool{}
		}
		out[identity][audience] = true
	}
	return out, nil
}
