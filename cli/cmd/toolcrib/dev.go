package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/egress"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/secretref"
	"github.com/toolcrib/toolcrib/services/admission"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/registry"
)

// devDir holds the development signing key, its JWKS and minted tokens.
const devDir = ".toolcrib/dev"

// devIssuer and devAudience match the services' default --auth-issuer and
// --auth-audience.
const (
	devIssuer   = "toolcrib-dev"
	devAudience = "toolcrib"
)

// devAdminGroup and devServiceGroup match the services' default
// --admin-group and --service-group.
const (
	devAdminGroup   = "toolcrib-admins"
	devServiceGroup = "toolcrib-services"
)

// devConfirmerGroup is the confirmer group the launched admission and lease
// use (their --confirmer-group, from the environment or the default): the
// gateway's confirmer token must carry it.
func devConfirmerGroup() string {
	if g, ok := os.LookupEnv(config.EnvName("confirmer-group")); ok {
		return g
	}
	return config.DefaultConfirmerGroup
}

// devPlatformTenant is the platform tenant the launched services use (their
// --auth-platform-tenant, from the environment or the default): admin and
// service tokens must carry it, or their groups give no role.
func devPlatformTenant() string {
	if t, ok := os.LookupEnv(config.EnvName("auth-platform-tenant")); ok {
		return t
	}
	return config.DefaultPlatformTenant
}

// launchable is a service `toolcrib dev up` starts in this process, its
// configuration parsed from the environment (its defaults are the local
// addresses).
type launchable struct {
	name string
	// health is the gRPC address serving grpc.health.v1; addrs says where
	// the service serves, for the start-up listing; mcpURL is the MCP
	// endpoint of the gateway (empty for the others).
	health, addrs, mcpURL string
	// run runs the service until ctx ends.
	run func(ctx context.Context) error
}

// serviceAddrs is the listing of a service's gRPC and metrics addresses.
func serviceAddrs(c config.Common) string {
	return "gRPC " + c.ListenAddr + "  metrics " + metricsURL(c.MetricsAddr)
}

// metricsURL is the /metrics URL at addr, or "off" when addr is empty.
func metricsURL(addr string) string {
	if addr == "" {
		return "off"
	}
	return "http://" + addr + "/metrics"
}

// devServiceLog receives the launched services' logs; nil is standard
// error (tests set it).
var devServiceLog io.Writer

// launchables lists every implemented service, in start order, each with
// its dev certificate and mTLS between them from pki (nil: plaintext).
func launchables(pki *devPKI) ([]launchable, error) {
	rcfg, err := devRegistryConfig(nil)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	dcfg, err := devDiscoveryConfig(nil)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	// Admission follows both services' Watch streams (retrying until they
	// answer) and reads their APIs with the dev service token; it serves
	// 127.0.0.1:7103 (metrics 9103) and is NOT_SERVING until caught up.
	acfg, err := admission.ParseConfig(nil, nil)
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	if acfg.ReceiptKeyFile == "" {
		// Receipt keys survive a restart of `dev up`, beside the lease keys.
		acfg.ReceiptKeyFile = devReceiptKeyFile
	}
	lcfg, err := devLeaseConfig(nil)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	gcfg, err := devGatewayConfig(nil)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	ccfg, err := devConsoleConfig(nil)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	for _, c := range []*config.Common{&rcfg.Common, &dcfg.Common, &acfg.Common, &lcfg.Common, &gcfg.Common, &ccfg.Common} {
		c.LogOutput = devServiceLog
	}
	if pki != nil {
		pki.applyDevTLS(&rcfg.Common, "registry")
		pki.applyDevTLS(&dcfg.Common, "discovery")
		pki.applyDevTLS(&acfg.Common, "admission")
		pki.applyDevTLS(&lcfg.Common, "lease")
		pki.applyDevTLS(&gcfg.Common, "gateway")
		pki.applyDevTLS(&ccfg.Common, "console")
	}
	return []launchable{
		{name: "registry", health: rcfg.ListenAddr, addrs: serviceAddrs(rcfg.Common),
			run: func(ctx context.Context) error { return registry.Run(ctx, rcfg) }},
		{name: "discovery", health: dcfg.ListenAddr, addrs: serviceAddrs(dcfg.Common),
			run: func(ctx context.Context) error { return discovery.Run(ctx, dcfg) }},
		{name: "admission", health: acfg.ListenAddr, addrs: serviceAddrs(acfg.Common),
			run: func(ctx context.Context) error { return admission.Run(ctx, acfg) }},
		leaseLaunchable(lcfg),
		gatewayLaunchable(gcfg),
		consoleLaunchable(ccfg),
	}, nil
}

// devRegistryConfig is the registry configuration of `dev up` from the
// environment lookup (nil: os.LookupEnv), with the dev egress and secret
// policy.
func devRegistryConfig(lookup func(string) (string, bool)) (registry.Config, error) {
	cfg, err := registry.ParseConfig(nil, lookup)
	if err == nil {
		err = devEgressAndSecrets(&cfg.Egress, &cfg.Secrets)
	}
	return cfg, err
}

// devDiscoveryConfig is the discovery configuration of `dev up` from the
// environment lookup (nil: os.LookupEnv), with the dev egress and secret
// policy.
func devDiscoveryConfig(lookup func(string) (string, bool)) (discovery.Config, error) {
	cfg, err := discovery.ParseConfig(nil, lookup)
	if err == nil {
		err = devEgressAndSecrets(&cfg.Egress, &cfg.Secrets)
	}
	return cfg, err
}

// devSecretsDir is where `file:` secret references may point in dev; the
// dev keys and tokens in devDir are outside it on purpose.
const devSecretsDir = ".toolcrib/secrets"

// devLoopbackPorts are the loopback ports MCP servers may listen on under
// `dev up` unless --egress-allow-loopback-ports (or --egress-allow-loopback)
// is configured: the example server's 7301 and a range for the operator's
// own local servers. Postgres (5432), Redis (6379), the suite's own gRPC
// and metrics ports (7101-7106, 9101-9106) and the example server's admin
// port (7302) are outside it, so a server registered at one of them is
// refused by the registry and never dialled by discovery or the gateway.
const devLoopbackPorts = "7301,7310-7399"

// devEgressAndSecrets is the dev launcher's policy: MCP servers on the
// loopback ports of devLoopbackPorts are allowed (local demos), and `file:`
// references may point into devSecretsDir unless --secret-dirs is
// configured.
func devEgressAndSecrets(eg *egress.Config, sec *secretref.Config) error {
	if !eg.AllowLoopback && eg.AllowLoopbackPorts == "" {
		eg.AllowLoopbackPorts = devLoopbackPorts
	}
	if sec.Dirs == "" {
		dir, err := filepath.Abs(devSecretsDir)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		sec.Dirs = dir
	}
	return nil
}

func devSigner() (*principal.Signer, error) {
	files, err := principal.EnsureDevKeys(devDir)
	if err != nil {
		return nil, fmt.Errorf("dev keys: %w", err)
	}
	return principal.LoadSigner(files.SigningKey, devIssuer, devAudience)
}

// writeToken mints a token and writes it to path (mode 0600).
func writeToken(s *principal.Signer, path string, c principal.Claims) error {
	tok, err := s.Mint(c)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(tok+"\n"), 0o600)
}

func devUp(ctx context.Context, e *env, plaintext bool) error {
	s, err := devSigner()
	if err != nil {
		return err
	}
	var pki *devPKI
	if plaintext {
		fmt.Fprintln(e.stderr, "toolcrib dev: --plaintext: the services run WITHOUT TLS; tokens, leases and receipts cross the network in the clear")
		e.tls = clientTLS{plaintext: true}
	} else {
		p, made, err := ensureDevPKI(devDir, time.Now())
		if err != nil {
			return err
		}
		printDevPKI(e, p, made)
		pki = &p
		// This process's own health checks use the dev CA and client
		// certificate, as the CLI does by default.
		cert, key := p.certFiles(devClientName)
		e.tls = clientTLS{caFile: p.CAFile, certFile: cert, keyFile: key}
	}
	adminToken := filepath.Join(devDir, "admin-token")
	if err := writeToken(s, adminToken, principal.Claims{Subject: "dev-admin", Tenant: devPlatformTenant(), Groups: []string{devAdminGroup}, TTL: 24 * time.Hour}); err != nil {
		return err
	}
	if err := writeToken(s, filepath.Join(devDir, "service-token"), principal.Claims{Subject: "toolcrib-dev-service", Tenant: devPlatformTenant(),
		Groups: []string{devServiceGroup}, TTL: 24 * time.Hour}); err != nil {
		return err
	}
	// The gateway's confirmer token (its default --confirmer-token-file):
	// only a confirmer may assert that a user confirmed a call.
	if err := writeToken(s, filepath.Join(devDir, "confirmer-token"), principal.Claims{Subject: "toolcrib-dev-gateway", Tenant: devPlatformTenant(),
		Groups: []string{devConfirmerGroup()}, TTL: 24 * time.Hour}); err != nil {
		return err
	}
	svcs, err := launchables(pki)
	if err != nil {
		return err
	}
	if len(svcs) == 0 {
		return errors.New("no toolcrib service is implemented yet; nothing to start")
	}
	fmt.Fprintf(e.stderr, "toolcrib dev: starting %d service(s); the CLI uses the admin token in %s (valid 24h)\n", len(svcs), adminToken)
	health := make([]string, 0, len(svcs))
	mcpURL := ""
	for _, svc := range svcs {
		fmt.Fprintf(e.stderr, "  %-10s %s\n", svc.name, svc.addrs)
		health = append(health, svc.health)
		if svc.mcpURL != "" {
			mcpURL = svc.mcpURL
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if waitServing(ctx, e, health, 250*time.Millisecond) == nil {
			fmt.Fprintf(e.stderr, "toolcrib dev: all %d services SERVING; %s\n", len(svcs), devTryIt(mcpURL))
		}
		return nil
	})
	for _, svc := range svcs {
		g.Go(func() error {
			if err := svc.run(ctx); err != nil {
				return fmt.Errorf("%s: %w", svc.name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// devTryIt is what `dev up` prints once every service is SERVING: the first
// step of the README's tour, and where MCP clients go.
func devTryIt(mcpURL string) string {
	trust := ""
	if strings.HasPrefix(mcpURL, "https://") {
		trust = ", trusting the dev CA " + devCAFile
	}
	return "try it from another terminal: `go run ./cli/cmd/toolcrib server list`, then the README's first tour; " +
		"MCP clients: " + mcpURL + " with a bearer token from `toolcrib dev token`" + trust
}

// waitServing returns nil once every address's grpc.health.v1 status is
// SERVING, asking again every interval, or ctx's error when it ends first.
func waitServing(ctx context.Context, e *env, addrs []string, every time.Duration) error {
	pending := addrs
	for {
		var still []string
		for _, addr := range pending {
			if st, err := healthOf(ctx, e, addr); err != nil || st != healthpb.HealthCheckResponse_SERVING {
				still = append(still, addr)
			}
		}
		if pending = still; len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// printDevPKI says where the dev CA and certificates are and which were
// made or renewed now.
func printDevPKI(e *env, p devPKI, made []string) {
	renewed := "all kept: still valid"
	if len(made) > 0 {
		renewed = "made now: " + strings.Join(made, ", ")
	}
	fmt.Fprintf(e.stderr, "toolcrib dev: TLS with the dev CA %s and one certificate per service in %s (%s); mTLS between the services\n",
		p.CAFile, p.dir, renewed)
}

// devUpCommand is `toolcrib dev up`.
func devUpCommand(e *env) *cobra.Command {
	var logLevel string
	var accessLog, plaintext bool
	return withFlags(&cobra.Command{
		Use: "up",
		Short: "run every implemented service in this process against local Postgres and Redis " +
			"(migrating first), with dev keys, tokens and TLS certificates under " + devDir + " (mTLS between the services)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := devLogFlags(logLevel, accessLog); err != nil {
				return err
			}
			return devUp(cmd.Context(), e, plaintext || e.tls.plaintext)
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&logLevel, "log-level", "", "every service's --log-level: debug, info, warn, error (default info, or env "+config.EnvName("log-level")+")")
		fs.BoolVar(&accessLog, "access-log", false, "every service's --access-log: log each finished gRPC call at info, successful internal calls included")
		fs.BoolVar(&plaintext, "plaintext", false, "run the services without TLS (an explicit opt-out: each service logs a warning)")
	})
}

// devCertsCommand is `toolcrib dev certs`.
func devCertsCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "certs",
		Short: "create or renew the development CA and TLS certificates under " + devDir + " (kept while valid)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pki, made, err := ensureDevPKI(devDir, time.Now())
			if err != nil {
				return err
			}
			printDevPKI(e, pki, made)
			return nil
		},
	}
}

// devLogFlags hands `dev up --log-level` and `--access-log` to every
// service it launches, through the environment their configurations are
// parsed from (so a bad level is refused as a service's own flag is).
func devLogFlags(level string, accessLog bool) error {
	if level != "" {
		if err := os.Setenv(config.EnvName("log-level"), level); err != nil {
			return err
		}
	}
	if accessLog {
		return os.Setenv(config.EnvName("access-log"), "true")
	}
	return nil
}

// devTokenCommand is `toolcrib dev token`.
func devTokenCommand(e *env) *cobra.Command {
	var sub, tenant, groups string
	var ttl time.Duration
	var admin, service bool
	return withFlags(&cobra.Command{
		Use:   "token",
		Short: "mint a development token signed by the local dev key and print it",
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := devSigner()
			if err != nil {
				return err
			}
			var gs []string
			for _, g := range strings.Split(groups, ",") {
				if g = strings.TrimSpace(g); g != "" {
					gs = append(gs, g)
				}
			}
			if admin || service {
				platform := devPlatformTenant()
				if tenant != "" && tenant != platform {
					return fmt.Errorf("--admin and --service tokens belong to the platform tenant %q, not %q: admin and service groups count only there", platform, tenant)
				}
				tenant = platform
			}
			if admin {
				gs = append(gs, devAdminGroup)
			}
			if service {
				gs = append(gs, devServiceGroup)
			}
			if ttl > principal.DefaultMaxTokenLifetime {
				fmt.Fprintf(e.stderr, "toolcrib dev token: a %v token is refused by services with the default --auth-max-token-lifetime (%v)\n",
					ttl, principal.DefaultMaxTokenLifetime)
			}
			tok, err := s.Mint(principal.Claims{Subject: sub, Tenant: tenant, Groups: gs, TTL: ttl})
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, tok)
			return nil
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&sub, "sub", "dev-user", "subject")
		fs.StringVar(&tenant, "tenant", "", "tenant claim; --admin and --service imply the platform tenant")
		fs.StringVar(&groups, "groups", "", "comma-separated groups")
		fs.BoolVar(&admin, "admin", false, "a platform admin: the admin group (toolcrib-admins) in the platform tenant")
		fs.BoolVar(&service, "service", false, "a toolcrib service: the service group (toolcrib-services) in the platform tenant")
		fs.DurationVar(&ttl, "ttl", time.Hour, "lifetime (services refuse more than their --auth-max-token-lifetime, default 24h)")
	})
}

// devKeysCommand is `toolcrib dev keys`.
func devKeysCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "keys",
		Short: "create the development signing key and JWKS under " + devDir + " (kept if present)",
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := principal.EnsureDevKeys(devDir)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "signing key: %s\nJWKS:        %s\n", files.SigningKey, files.JWKS)
			return nil
		},
	}
}

// devGroup is `toolcrib dev …`.
func devGroup(e *env) *cobra.Command {
	return group("dev", "run the suite locally: keys, tokens, a holder key, and every service in one process",
		devUpCommand(e), devCertsCommand(e), devKeysCommand(e), devTokenCommand(e), holderKeyCommand(e))
}
