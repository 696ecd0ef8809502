package registry

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/services/registry/internal/grpcapi"
	"github.com/toolcrib/toolcrib/services/registry/internal/intake"
	"github.com/toolcrib/toolcrib/services/registry/internal/store"
	"github.com/toolcrib/toolcrib/services/registry/migrations"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Schema is the registry's Postgres schema.
const Schema = "registry"

// Migrations are the registry's migration sets: its own tables and the
// Watch change log.
func Migrations() []postgres.Set {
	return []postgres.Set{migrations.Set(), changelog.Migrations()}
}

func spec() service.Spec {
	return service.Spec{
		Name:        "registry",
		Schema:      Schema,
		Migrations:  Migrations(),
		HealthNames: []string{registryv1.RegistryService_ServiceDesc.ServiceName},
	}
}

// Run serves the registry until ctx ends (nil after a clean stop): the
// RegistryService, the change-log listener and compaction, and, when
// DiscoveryAddr is set, the loop that follows discovery's Watch.
func Run(ctx context.Context, cfg Config) error {
	return service.Run(ctx, spec(), cfg.Common, func(ctx context.Context, d *service.Deps) (service.Parts, error) {
		log := changelog.New(d.Pool, "registry_changes", d.Logger)
		st := store.New(d.Pool, log)
		eg, err := cfg.Egress.Policy()
		if err != nil {
			return service.Parts{}, err
		}
		secrets, err := cfg.Secrets.Policy()
		if err != nil {
			return service.Parts{}, err
		}
		api := grpcapi.New(st, grpcapi.Options{Heartbeat: cfg.WatchHeartbeat, Draining: d.Draining, Logger: d.Logger,
			Egress: eg, Secrets: secrets})
		parts := service.Parts{
			Register: func(s *grpc.Server) { registryv1.RegisterRegistryServiceServer(s, api) },
			Loops: []func(context.Context) error{
				func(ctx context.Context) error { log.Listen(ctx); return nil },
				func(ctx context.Context) error { compact(ctx, log, cfg, d.Logger); return nil },
			},
		}
		if cfg.DiscoveryAddr != "" {
			conn, err := grpc.NewClient(cfg.DiscoveryAddr, d.ServiceDialOptions()...)
			if err != nil {
				return service.Parts{}, fmt.Errorf("discovery client: %w", err)
			}
			parts.Close = func() { _ = conn.Close() }
			loop := intake.New(discoveryv1.NewDiscoveryServiceClient(conn), st, d.Logger)
			parts.Loops = append(parts.Loops, loop.Run)
		}
		return parts, nil
	})
}

// Migrate runs the registry's migrations and returns (`registry migrate`).
func Migrate(ctx context.Context, cfg Config) error {
	return service.Migrate(ctx, spec(), cfg.Common)
}

// compact deletes changes older than the retention every interval, always
// keeping the newest WatchKeep, until ctx ends. Failures (e.g. before the
// first migration) are logged and retried on the next tick.
func compact(ctx context.Context, log *changelog.Log, cfg Config, logger *slog.Logger) {
	t := time.NewTicker(cfg.CompactInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := log.Compact(ctx, time.Now().Add(-cfg.WatchRetention), cfg.WatchKeep)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.WarnContext(ctx, "change log compaction failed; will retry", "error", err)
		case n > 0:
			logger.InfoContext(ctx, "change log compacted", "deleted", n)
		}
	}
}
