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

	"github.com/toolcrib/toolcrib/platform/egress"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/secretref"
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
		admin               bool
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
				fs.StringVar(&tenant, "tenant", "", "tenant claim; empty for a platform principal")
				fs.StringVar(&groups, "groups", "", "comma-separated groups")
				fs.BoolVar(&admin, "admin", false, "add the admin group (toolcrib-admins)")
				fs.DurationVar(&ttl, "ttl", time.Hour, "lifetime")
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
				if admin {
					gs = append(gs, "toolcrib-admins")
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
	if err := writeToken(s, adminToken, principal.Claims{Subject: "dev-admin", Groups: []string{"toolcrib-admins"}, TTL: 24 * time.Hour}); err != nil {
		return err
	}
	if err := writeToken(s, filepath.Join(devDir, "service-token"), principal.Claims{Subject: "toolcrib-dev-service", Groups: []string{"toolcrib-services"}, TTL: 24 * time.Hour}); err != nil {
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
