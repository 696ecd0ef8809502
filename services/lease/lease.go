package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	platformincident "github.com/toolcrib/toolcrib/platform/incident"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/rpcserver"
	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/services/lease/admissionview"
	"github.com/toolcrib/toolcrib/services/lease/internal/grpcapi"
	"github.com/toolcrib/toolcrib/services/lease/internal/incident"
	"github.com/toolcrib/toolcrib/services/lease/internal/keys"
	"github.com/toolcrib/toolcrib/services/lease/internal/ledger"
	"github.com/toolcrib/toolcrib/services/lease/internal/metrics"
	"github.com/toolcrib/toolcrib/services/lease/internal/standing"
	"github.com/toolcrib/toolcrib/services/lease/internal/store"
	"github.com/toolcrib/toolcrib/services/lease/internal/watch"
	"github.com/toolcrib/toolcrib/services/lease/migrations"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Schema is the lease service's Postgres schema.
const Schema = "lease"

// Migrations are the lease service's migration sets.
func Migrations() []postgres.Set { return []postgres.Set{migrations.Set()} }

// streamWorkers is how many reused goroutines serve calls.
const streamWorkers = 64

func spec() service.Spec {
	return service.Spec{
		Name:        "lease",
		Schema:      Schema,
		Migrations:  Migrations(),
		HealthNames: []string{leasev1.LeaseService_ServiceDesc.ServiceName},
		UsesRedis:   true,
		// The hot path, a call per tool call: an OK Issue (its execution
		// receipt is the record) or Verify (its answer is counted by
		// failure in the metrics) is access-logged at debug; a failed call
		// still at its level.
		// Verify's stack (interceptors, then two Ed25519 verifications)
		// outgrows a new goroutine's: reused workers grow it once, as
		// admission's do (runtime.newstack was ~6% of Verify's CPU).
		StreamWorkers: streamWorkers,
	}
}

// Run serves the lease service until ctx ends (nil after a clean stop): the
// LeaseService and the key-maintenance loop.
func Run(ctx context.Context, cfg Config) error {
	return service.Run(ctx, spec(), cfg.Common, func(ctx context.Context, d *service.Deps) (service.Parts, error) {
		ring, err := keys.NewRing(ctx, keys.NewFile(cfg.KeyFile), keys.Options{RotateEvery: cfg.KeyRotateEvery, Skew: cfg.Skew, SignLag: cfg.KeyCheckInterval})
		if err != nil {
			return service.Parts{}, err
		}
		st := store.New(d.Pool)
		standingView := standing.New(standing.Options{Pool: d.Pool, Store: st, Logger: d.Logger})
		m := metrics.New(d.Metrics, metrics.Sources{FrozenCount: st.FrozenCount, KeyAge: ring.CurrentAge})
		opts := grpcapi.Options{
			Store: st, Standing: standingView, Ring: ring, Ledger: ledger.NewRedis(d.Redis), Metrics: m,
			Receipts: cfg.Receipts, Freshness: cfg.Freshness,
			Issuer: cfg.Issuer, Skew: cfg.Skew, ProofWindow: cfg.ProofWindow, Logger: d.Logger,
		}
		if opts.RedeemAudiences, err = ParseRedeemAudiences(cfg.RedeemAudiences); err != nil {
			return service.Parts{}, fmt.Errorf("--redeem-audiences: %w", err)
		}
		if opts.RedeemAudiences == nil {
			d.Logger.InfoContext(ctx, "Redeem is open to every toolcrib service for every lease audience (set --redeem-audiences to bind executors to their audiences)")
		}
		var parts service.Parts
		parts.Loops = append(parts.Loops, standingView.Run)
		if cfg.AdmissionAddr != "" {
			conn, err := grpc.NewClient(cfg.AdmissionAddr, grpc.WithTransportCredentials(d.Transport))
			if err != nil {
				return service.Parts{}, fmt.Errorf("admission client: %w", err)
			}
			parts.Close = func() { _ = conn.Close() }
			ac := admissionv1.NewAdmissionServiceClient(conn)
			opts.Checker = admissionview.AdmissionChecker{Client: ac}
			if opts.Receipts == nil {
				opts.Receipts = admissionview.AdmissionReceipts{Client: ac}
			}
			if cfg.ReceiptKeys == nil {
				opts.SignedReceipts = admissionview.NewSignedReceipts(admissionview.AdmissionKeys{Client: ac}, admissionview.SignedReceiptsOptions{})
			}
		}
		if cfg.ReceiptKeys != nil {
			opts.SignedReceipts = admissionview.NewSignedReceipts(cfg.ReceiptKeys, admissionview.SignedReceiptsOptions{})
		}
		if opts.Freshness == nil && cfg.RegistryAddr != "" {
			// An automatic freeze is this replica's own change: its
			// standing view holds it at once, as after a FreezeIssuance.
			frozen := func() {
				m.AutoFrozen()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := standingView.Sync(sctx); err != nil {
					d.Logger.WarnContext(sctx, "standing view not synced after an automatic freeze; Issue and Verify read Postgres until it reloads", "error", err)
				}
			}
			view, dconn, closeView, err := followStreams(cfg, st, d, frozen)
			if err != nil {
				if parts.Close != nil {
					parts.Close()
				}
				return service.Parts{}, err
			}
			opts.Freshness = view
			// Leases issued after their grant was revoked are reported
			// to discovery's rollout guard.
			rep := platformincident.New(platformincident.Client{C: discoveryv1.NewDiscoveryServiceClient(dconn)}, d.Logger)
			opts.Incidents = incident.New(incident.Options{Revocations: view, Reporter: rep, Found: m.Incident, Logger: d.Logger})
			parts.Loops = append(parts.Loops, rep.Run)
			prev := parts.Close
			parts.Close = func() {
				closeView()
				if prev != nil {
					prev()
				}
			}
			parts.Loops = append(parts.Loops, view.Run)
			parts.Checks = append(parts.Checks, rpcserver.Check{Name: "watch", Func: func(context.Context) error {
				if ok, why := view.Fresh(); !ok {
					return errors.New(why)
				}
				return nil
			}})
		}
		if opts.Freshness == nil {
			d.Logger.WarnContext(ctx, "no freshness source wired: Verify does not check policy epoch and generation")
		}
		if opts.Receipts == nil {
			d.Logger.WarnContext(ctx, "no receipt lookup wired: Issue by receipt_id is refused")
		}
		if opts.SignedReceipts == nil {
			d.Logger.WarnContext(ctx, "no admission keys wired: Issue by signed_receipt is refused")
		}
		api := grpcapi.New(opts)
		parts.Register = func(s *grpc.Server) {
			leasev1.RegisterLeaseServiceServer(s, api)
			if cfg.Extra != nil {
				cfg.Extra(s, d)
			}
		}
		parts.Loops = append(parts.Loops, func(ctx context.Context) error {
			ring.Run(ctx, cfg.KeyCheckInterval, func(err error) {
				d.Logger.WarnContext(ctx, "signing-key maintenance failed; will retry", "error", err)
			})
			return nil
		})
		return parts, nil
	})
}

// followStreams dials the registry and discovery with the service token
// and returns the Watch view over them and the discovery connection.
func followStreams(cfg Config, st *store.Store, d *service.Deps, frozen func()) (*watch.View, *grpc.ClientConn, func(), error) {
	dial := func(addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, d.ServiceDialOptions()...)
	}
	rconn, err := dial(cfg.RegistryAddr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("registry client: %w", err)
	}
	dconn, err := dial(cfg.DiscoveryAddr)
	if err != nil {
		_ = rconn.Close()
		return nil, nil, nil, fmt.Errorf("discovery client: %w", err)
	}
	view := watch.New(watch.Options{
		Registry: registryv1.NewRegistryServiceClient(rconn), Discovery: discoveryv1.NewDiscoveryServiceClient(dconn),
		Window: cfg.ValidityWindow, Freezer: st, Frozen: frozen, Logger: d.Logger,
	})
	return view, dconn, func() { _ = dconn.Close(); _ = rconn.Close() }, nil
}

// Migrate runs the lease service's migrations and returns (`lease
// migrate`).
func Migrate(ctx context.Context, cfg Config) error {
	return service.Migrate(ctx, spec(), cfg.Common)
}
