package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/platform/stdio"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/internal/grpcapi"
	"github.com/toolcrib/toolcrib/services/discovery/internal/guard"
	"github.com/toolcrib/toolcrib/services/discovery/internal/metrics"
	"github.com/toolcrib/toolcrib/services/discovery/internal/scan"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
	"github.com/toolcrib/toolcrib/services/discovery/validate"
)

// ChangeChannel is the NOTIFY channel of discovery's change log.
const ChangeChannel = "discovery_changes"

// Spec is discovery's service description for the shared start-up.
func Spec() service.Spec {
	return service.Spec{
		Name:        "discovery",
		Schema:      store.Schema,
		Migrations:  store.Sets(),
		HealthNames: []string{discoveryv1.DiscoveryService_ServiceDesc.ServiceName},
	}
}

// Run serves discovery until ctx ends: the gRPC API, the scan workers, the
// registry watch and the periodic jobs. With cfg.Migrate it migrates its
// schema (its own tables, the change log and River's) at start-up.
func Run(ctx context.Context, cfg Config) error {
	return service.Run(ctx, Spec(), cfg.Common, func(ctx context.Context, d *service.Deps) (service.Parts, error) {
		scanCfg, err := cfg.scanConfig()
		if err != nil {
			return service.Parts{}, err
		}
		if scanCfg.Metrics == nil {
			scanCfg.Metrics = d.Metrics
		}
		// Scans hold a connection for their advisory lock and use another
		// for writes, so the workers get a pool of their own, sized to them.
		wpool, err := openPool(ctx, cfg.PostgresURL, scan.PoolSize(cfg.Workers))
		if err != nil {
			return service.Parts{}, err
		}
		log := changelog.New(d.Pool, ChangeChannel, d.Logger)
		reg := cfg.Registry
		var regClient *registryclient.Client
		if reg == nil {
			regClient, err = registryclient.Dial(cfg.RegistryAddr, d.Transport, d.ServiceToken)
			if err != nil {
				wpool.Close()
				return service.Parts{}, err
			}
			reg = regClient
		}
		m := metrics.New(d.Metrics)
		obs := observer{lg: d.Logger, m: m}
		var admConn *grpc.ClientConn
		if cfg.Guard {
			var adm guard.Admission
			if cfg.AdmissionAddr != "" {
				admConn, err = grpc.NewClient(cfg.AdmissionAddr, d.ServiceDialOptions()...)
				if err != nil {
					wpool.Close()
					return service.Parts{}, fmt.Errorf("discovery: dial admission %s: %w", cfg.AdmissionAddr, err)
				}
				adm = guard.AdmissionClient{Client: admissionv1.NewAdmissionServiceClient(admConn)}
			}
			g := guard.New(store.New(wpool, log).WithObserver(obs), adm, guard.Config{Window: cfg.GuardWindow,
				MissingRate: cfg.GuardMissingRate, MinChecks: int64(cfg.GuardMinChecks)}, d.Logger, m)
			scanCfg.Guard, scanCfg.GuardInterval = g.Pass, cfg.GuardInterval
			if passed := cfg.GuardPassed; passed != nil {
				scanCfg.Guard = func(ctx context.Context) error {
					defer passed()
					return g.Pass(ctx)
				}
			}
		}
		closeAdm := func() {
			if admConn != nil {
				_ = admConn.Close()
			}
		}
		scanner, err := scan.New(wpool, store.New(wpool, log).WithObserver(obs), log, reg, scanCfg, d.Logger)
		if err != nil {
			wpool.Close()
			closeAdm()
			return service.Parts{}, err
		}
		metrics.RegisterQueueDepth(d.Metrics, scanner.QueueDepth)
		api := grpcapi.New(store.New(d.Pool, log).WithObserver(obs), log, scanner, cfg.WatchHeartbeat, d.Draining)
		// Migrate River's tables now when Postgres answers at once, so the
		// service is never SERVING without them; otherwise the loop below
		// waits for Postgres and migrates then.
		ready := false
		if cfg.Migrate {
			mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			merr := migrateAll(mctx, wpool, d.Logger)
			ready = merr == nil
			if merr != nil {
				d.Logger.Warn("migrating at start-up failed; retrying in the background", "error", merr)
			}
			cancel()
		}
		return service.Parts{
			Register: func(s *grpc.Server) { discoveryv1.RegisterDiscoveryServiceServer(s, api) },
			Loops: []func(context.Context) error{
				func(ctx context.Context) error { log.Listen(ctx); return nil },
				func(ctx context.Context) error {
					if !ready {
						if err := waitForSchema(ctx, wpool, cfg.Migrate, d.Logger); err != nil {
							return err
						}
					}
					return scanner.Run(ctx)
				},
			},
			Close: func() {
				wpool.Close()
				closeAdm()
				if regClient != nil {
					_ = regClient.Close()
				}
			},
		}, nil
	})
}

// Migrate runs discovery's migrations once (the `migrate` subcommand): its
// tables, the change log and River's tables.
func Migrate(ctx context.Context, cfg Config) error {
	if err := service.Migrate(ctx, Spec(), cfg.Common); err != nil {
		return err
	}
	pool, err := postgres.Open(ctx, cfg.PostgresURL, store.Schema)
	if err != nil {
		return err
	}
	defer pool.Close()
	return scan.Migrate(ctx, pool, cfg.Logger(nilWriter{}, "discovery"))
}

type nilWriter struct{}

func (nilWriter) Write(p []byte) (int, error) { return len(p), nil }

// waitForSchema waits until the schema is usable: with migrate it applies
// the migrations (safe alongside the health check's own run of them),
// otherwise it waits for another process to have done so.
func waitForSchema(ctx context.Context, pool *pgxpool.Pool, migrate bool, lg *slog.Logger) error {
	for {
		var err error
		if migrate {
			err = migrateAll(ctx, pool, lg)
		} else {
			var ok bool
			err = pool.QueryRow(ctx, `SELECT to_regclass('discovery.river_job') IS NOT NULL AND to_regclass('discovery.pointers') IS NOT NULL`).Scan(&ok)
			if err == nil && !ok {
				err = fmt.Errorf("the discovery schema is not migrated yet (run `discovery migrate`)")
			}
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		lg.WarnContext(ctx, "waiting for the database before starting scan workers", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// migrateAll applies discovery's SQL migration sets and River's migrations
// (rivermigrate); safe alongside the health check's run of the SQL sets.
func migrateAll(ctx context.Context, pool *pgxpool.Pool, lg *slog.Logger) error {
	if err := postgres.Migrate(ctx, pool, store.Schema, lg, store.Sets()...); err != nil {
		return err
	}
	return scan.Migrate(ctx, pool, lg)
}

// openPool opens a pool on the discovery schema with room for n connections.
func openPool(ctx context.Context, url string, n int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("discovery: parse postgres url: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = store.Schema
	postgres.GenericPlans(cfg.ConnConfig)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	cfg.MaxConns = max(cfg.MaxConns, n)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// scanConfig maps the service configuration to the scanner's.
func (c *Config) scanConfig() (scan.Config, error) {
	roots, err := crawl.LoadRoots(c.TLSCAFile)
	if err != nil {
		return scan.Config{}, err
	}
	eg, err := c.Egress.Policy()
	if err != nil {
		return scan.Config{}, err
	}
	secrets, err := c.Secrets.Policy()
	if err != nil {
		return scan.Config{}, err
	}
	linger, grace, listeners := c.Linger, c.RetentionGrace, c.MaxListeners
	if linger == 0 {
		linger = -1 // the scanner's "disabled"
	}
	if grace == 0 {
		grace = -1 // the scanner's "no grace"
	}
	if listeners == 0 {
		listeners = -1 // the scanner's "no listening"
	}
	return scan.Config{
		Workers: c.Workers, ScanTimeout: c.ScanTimeout, RescueAfter: c.RescueAfter,
		RefreshInterval: c.RefreshInterval, RefreshTick: c.RefreshTick,
		RetryBase: c.RetryBase, RetryMax: c.RetryMax, MaxAttempts: c.MaxAttempts,
		SnapshotTTL: c.SnapshotTTL, Linger: linger,
		RetentionInterval: c.RetentionInterval, RetentionGrace: grace,
		ChangeLogRetention: c.ChangeLogRetention, RunRetention: c.RunRetention, FetchCooldown: c.FetchCooldown,
		MaxListeners: listeners, ListenSweep: c.ListenSweep, NotifyMinInterval: c.NotifyMinInterval, NotifyMaxInterval: c.NotifyMaxInterval,
		Metrics: c.Metrics,
		Crawl: crawl.Options{
			MaxPages: c.MaxPages, MaxTools: c.MaxTools, MaxBytes: int64(c.MaxBytes),
			ConnectTimeout: c.ConnectTimeout, PageTimeout: c.PageTimeout, RootCAs: roots,
			AllowInsecureHTTP: c.AllowInsecureHTTP, MinProtocolVersion: c.MinProtocolVersion, CredentialEnv: c.CredentialEnv,
			Egress: &eg, Identities: stdio.NewHasher(),
		},
		Secrets:   secrets,
		Limits:    validate.Limits{MaxToolBytes: c.MaxToolBytes, MaxSchemaBytes: c.MaxSchemaBytes, MaxSchemaDepth: c.MaxSchemaDepth},
		LookupEnv: c.LookupEnv,
		Worker:    c.Worker,
		AutoScans: !c.NoAutoScans,
	}, nil
}
