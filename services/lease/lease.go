package lease

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/services/lease/decision"
	"github.com/toolcrib/toolcrib/services/lease/internal/grpcapi"
	"github.com/toolcrib/toolcrib/services/lease/internal/keys"
	"github.com/toolcrib/toolcrib/services/lease/internal/ledger"
	"github.com/toolcrib/toolcrib/services/lease/internal/store"
	"github.com/toolcrib/toolcrib/services/lease/migrations"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
)

// Schema is the lease service's Postgres schema.
const Schema = "lease"

// Migrations are the lease service's migration sets.
func Migrations() []postgres.Set { return []postgres.Set{migrations.Set()} }

func spec() service.Spec {
	return service.Spec{
		Name:        "lease",
		Schema:      Schema,
		Migrations:  Migrations(),
		HealthNames: []string{leasev1.LeaseService_ServiceDesc.ServiceName},
		UsesRedis:   true,
	}
}

// Run serves the lease service until ctx ends (nil after a clean stop): the
// LeaseService and the key-maintenance loop.
func Run(ctx context.Context, cfg Config) error {
	return service.Run(ctx, spec(), cfg.Common, func(ctx context.Context, d *service.Deps) (service.Parts, error) {
		ring, err := keys.NewRing(ctx, keys.NewFile(cfg.KeyFile), keys.Options{RotateEvery: cfg.KeyRotateEvery, Skew: cfg.Skew})
		if err != nil {
			return service.Parts{}, err
		}
		opts := grpcapi.Options{
			Store: store.New(d.Pool), Ring: ring, Ledger: ledger.NewRedis(d.Redis),
			Receipts: cfg.Receipts, Freshness: cfg.Freshness,
			Issuer: cfg.Issuer, Skew: cfg.Skew, ProofWindow: cfg.ProofWindow, Logger: d.Logger,
		}
		var parts service.Parts
		if cfg.AdmissionAddr != "" {
			conn, err := grpc.NewClient(cfg.AdmissionAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return service.Parts{}, fmt.Errorf("admission client: %w", err)
			}
			parts.Close = func() { _ = conn.Close() }
			opts.Checker = decision.AdmissionChecker{Client: admissionv1.NewAdmissionServiceClient(conn)}
		}
		if cfg.Freshness == nil {
			d.Logger.WarnContext(ctx, "no freshness source wired: Verify does not check policy epoch and generation")
		}
		if cfg.Receipts == nil {
			d.Logger.WarnContext(ctx, "no receipt lookup wired: Issue by receipt_id is refused")
		}
		api := grpcapi.New(opts)
		parts.Register = func(s *grpc.Server) { leasev1.RegisterLeaseServiceServer(s, api) }
		parts.Loops = []func(context.Context) error{func(ctx context.Context) error {
			ring.Run(ctx, cfg.KeyCheckInterval, func(err error) {
				d.Logger.WarnContext(ctx, "signing-key maintenance failed; will retry", "error", err)
			})
			return nil
		}}
		return parts, nil
	})
}

// Migrate runs the lease service's migrations and returns (`lease
// migrate`).
func Migrate(ctx context.Context, cfg Config) error {
	return service.Migrate(ctx, spec(), cfg.Common)
}
