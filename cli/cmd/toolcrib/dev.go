package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

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

// devPlatformTenant is the platform tenant the launched services use (their
// --auth-platform-tenant, from the environment or the default): admin and
// service tokens must carry it, or their groups give no role.
func devPlatformTenant() string {
	if t, ok := os.LookupEnv(config.EnvName("auth-platform-tenant")); ok {
		return t
	}
	return config.DefaultPlatformTenant
}

// launchable is a service `toolcrib dev up` starts in this process.
type launchable struct {
	name string
	// run parses the service's configuration from the environment (its
	// defaults are the local addresses) and runs it until ctx ends.
	run func(ctx context.Context) error
}

// launchables lists every implemented service, in start order.
func launchables() []launchable {
	var l []launchable
	l = append(l, launchable{name: "registry", run: func(ctx context.Context) error {
		cfg, err := registry.ParseConfig(nil, nil)
		if err != nil {
			return err
		}
		if err := devEgressAndSecrets(&cfg.Egress, &cfg.Secrets); err != nil {
			return err
		}
		return registry.Run(ctx, cfg)
	}})
	l = append(l, launchable{name: "discovery", run: func(ctx context.Context) error {
		cfg, err := discovery.ParseConfig(nil, nil)
		if err != nil {
			return err
		}
		if err := devEgressAndSecrets(&cfg.Egress, &cfg.Secrets); err != nil {
			return err
		}
		return discovery.Run(ctx, cfg)
	}})
	// Admission follows both services' Watch streams (retrying until they
	// answer) and reads their APIs with the dev service token; it serves
	// 127.0.0.1:7103 (metrics 9103) and is NOT_SERVING until caught up.
	l = append(l, launchable{name: "admission", run: func(ctx context.Context) error {
		cfg, err := admission.ParseConfig(nil, nil)
		if err != nil {
			return err
		}
		return admission.Run(ctx, cfg)
	}})
	l = append(l, leaseLaunchable())
	l = append(l, gatewayLaunchable())
	return l
}

// devSecretsDir is where `file:` secret references may point in dev; the
// dev keys and tokens in devDir are outside it on purpose.
const devSecretsDir = ".toolcrib/secrets"

// devEgressAndSecrets is the dev launcher's policy: MCP servers on loopback
// are allowed (local demos), and `file:` references may point into
// devSecretsDir unless --secret-dirs is configured.
func devEgressAndSecrets(eg *egress.Config, sec *secretref.Config) error {
	eg.AllowLoopback = true
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

func devCommands() []command {
	var (
		sub, tenant, groups string
		ttl                 time.Duration
		admin, service      bool
	)
	return []command{
		{
			name:    "dev keys",
			summary: "create the development signing key and JWKS under " + devDir + " (kept if present)",
			run: func(ctx context.Context, e *env, args []string) error {
				files, err := principal.EnsureDevKeys(devDir)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "signing key: %s\nJWKS:        %s\n", files.SigningKey, files.JWKS)
				return nil
			},
		},
		{
			name:    "dev token",
			summary: "mint a development token signed by the local dev key and print it",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&sub, "sub", "dev-user", "subject")
				fs.StringVar(&tenant, "tenant", "", "tenant claim; --admin and --service imply the platform tenant")
				fs.StringVar(&groups, "groups", "", "comma-separated groups")
				fs.BoolVar(&admin, "admin", false, "a platform admin: the admin group (toolcrib-admins) in the platform tenant")
				fs.BoolVar(&service, "service", false, "a toolcrib service: the service group (toolcrib-services) in the platform tenant")
				fs.DurationVar(&ttl, "ttl", time.Hour, "lifetime (services refuse more than their --auth-max-token-lifetime, default 24h)")
			},
			run: func(ctx context.Context, e *env, args []string) error {
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
		},
		{
			name: "dev up",
			summary: "run every implemented service in this process against local Postgres and Redis " +
				"(migrating first), with dev keys and tokens under " + devDir,
			run: func(ctx context.Context, e *env, args []string) error {
				return devUp(ctx, e)
			},
		},
	}
}

func devUp(ctx context.Context, e *env) error {
	s, err := devSigner()
	if err != nil {
		return err
	}
	adminToken := filepath.Join(devDir, "admin-token")
	if err := writeToken(s, adminToken, principal.Claims{Subject: "dev-admin", Tenant: devPlatformTenant(), Groups: []string{devAdminGroup}, TTL: 24 * time.Hour}); err != nil {
		return err
	}
	if err := writeToken(s, filepath.Join(devDir, "service-token"), principal.Claims{Subject: "toolcrib-dev-service", Tenant: devPlatformTenant(),
		Groups: []string{devServiceGroup}, TTL: 24 * time.Hour}); err != nil {
		return err
	}
	svcs := launchables()
	if len(svcs) == 0 {
		return errors.New("no toolcrib service is implemented yet; nothing to start")
	}
	fmt.Fprintf(e.stderr, "toolcrib dev: starting %d service(s); the CLI uses the admin token in %s (valid 24h)\n", len(svcs), adminToken)
	g, ctx := errgroup.WithContext(ctx)
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
