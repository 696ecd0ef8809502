package admission

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/incident"
	"github.com/toolcrib/toolcrib/platform/keyring"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/rpcserver"
	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/services/admission/internal/args"
	"github.com/toolcrib/toolcrib/services/admission/internal/cache"
	"github.com/toolcrib/toolcrib/services/admission/internal/grpcapi"
	"github.com/toolcrib/toolcrib/services/admission/internal/metrics"
	"github.com/toolcrib/toolcrib/services/admission/internal/receipts"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
	"github.com/toolcrib/toolcrib/services/admission/internal/upstream"
	"github.com/toolcrib/toolcrib/services/admission/migrations"
)

// Schema is admission's Postgres schema.
const Schema = "admission"

// Migrations are admission's migration sets.
func Migrations() []postgres.Set { return []postgres.Set{migrations.Set()} }

// streamWorkers is how many reused goroutines serve calls.
const streamWorkers = 64

func spec() service.Spec {
	return service.Spec{
		Name: "admission", Schema: Schema, Migrations: Migrations(), UsesRedis: true,
		// Redis is the L2: without it Checks are decided from L1 and direct
		// reads (issue 10 point 4), so a Redis outage after start-up does not
		// take replicas out of rotation.
		RedisDegradable: true,
		HealthNames:     []string{admissionv1.AdmissionService_ServiceDesc.ServiceName},
		// Check, and GetReceipt, which the lease service asks once per
		// Issue by receipt.
		// Check's stack (interceptors, then the decision) outgrows a new
		// goroutine's: reused workers grow it once (DESIGN §9 profile).
		StreamWorkers: streamWorkers,
	}
}

// Run serves admission until ctx ends (nil after a clean stop): the
// AdmissionService, the two Watch followers, the receipt writer and the
// run binder. Health is NOT_SERVING until Postgres, Redis and both Watch
// streams are caught up (a heartbeat within the validity window); after
// that, Postgres or a stale stream make it NOT_SERVING again, Redis does not
// (it is only the L2).
func Run(ctx context.Context, cfg Config) error {
	return service.Run(ctx, spec(), cfg.Common, func(ctx context.Context, d *service.Deps) (service.Parts, error) {
		dial := func(addr string) (*grpc.ClientConn, error) {
			// Redial at most one validity window apart (gRPC's default backs
			// off to 2 minutes): a healed link ends STALE_POLICY promptly.
			bo := backoff.DefaultConfig
			bo.BaseDelay, bo.MaxDelay = 100*time.Millisecond, max(cfg.ValidityWindow, time.Second)
			return grpc.NewClient(addr, append(d.ServiceDialOptions(),
				grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 5 * time.Second}))...)
		}
		rconn, err := dial(cfg.RegistryAddr)
		if err != nil {
			return service.Parts{}, fmt.Errorf("registry client: %w", err)
		}
		dconn, err := dial(cfg.DiscoveryAddr)
		if err != nil {
			_ = rconn.Close()
			return service.Parts{}, fmt.Errorf("discovery client: %w", err)
		}
		rc, dc := registryv1.NewRegistryServiceClient(rconn), discoveryv1.NewDiscoveryServiceClient(dconn)
		reg := &upstream.Registry{C: rc}
		disc := &upstream.Discovery{C: dc, Logger: d.Logger, RunTTL: cfg.RunTTL}
		heads := replica.NewHeads(cfg.ValidityWindow, nil)
		follow := upstream.FollowOptions{Window: cfg.ValidityWindow, Logger: d.Logger}
		regFollow, discFollow := upstream.RegistryFollower(rc, heads, follow), upstream.DiscoveryFollower(dc, heads, follow)
		c := cache.New(cache.Options{L1Size: cfg.L1Size, Redis: d.Redis})
		w := receipts.New(d.Pool, receipts.Options{BatchSize: cfg.ReceiptBatch, Interval: cfg.ReceiptInterval,
			MissWait: cfg.ReceiptMissWait, RecentSize: cfg.ReceiptRecent, Logger: d.Logger})
		lim := args.DefaultLimits
		lim.MaxBytes = cfg.MaxArgumentBytes
		host, _ := os.Hostname()
		m := metrics.New(d.Metrics, metrics.Sources{Heads: heads, Pending: w.Pending, ReceiptLookups: w.Lookups})
		incidents := incident.New(incident.Client{C: dc}, d.Logger)
		signing, err := receiptSigning(ctx, cfg)
		if err != nil {
			_ = dconn.Close()
			_ = rconn.Close()
			return service.Parts{}, err
		}
		if cfg.ReceiptKeyFile == "" {
			d.Logger.WarnContext(ctx, "no --receipt-key-file: receipt signing keys live in memory; run a single replica, or give every replica one key file")
		}
		api := grpcapi.New(grpcapi.Options{
			Signing: signing,
			Heads:   heads, Material: replica.NewMaterial(reg, disc, reg, 100_000), Pointers: disc, Cache: c,
			Validator: args.NewValidator(10_000), Limits: lim, Receipts: w, Binder: disc, CacheTTL: cfg.CacheTTL,
			Replica: fmt.Sprintf("%s:%d", host, os.Getpid()), Logger: d.Logger, Decided: m.Decided,
			AuditRate: cfg.AuditRate, Incidents: incidents, Audited: m.Rechecked, Confirmers: d.Verifier,
			ConditionNow: cfg.ConditionClock,
		})
		return service.Parts{
			Register: func(s *grpc.Server) { admissionv1.RegisterAdmissionServiceServer(s, api) },
			Loops: []func(context.Context) error{
				regFollow.Run,
				discFollow.Run,
				w.Run,
				disc.StartBinder,
				incidents.Run,
				func(ctx context.Context) error {
					metrics.Freshness(ctx, heads, d.Logger, 250*time.Millisecond)
					return nil
				},
				func(ctx context.Context) error {
					signing.Ring.Run(ctx, cfg.ReceiptKeyCheckInterval, func(err error) {
						d.Logger.WarnContext(ctx, "receipt signing-key maintenance failed; will retry", "error", err)
					})
					return nil
				},
			},
			Checks: []rpcserver.Check{{Name: "watch", Func: func(context.Context) error {
				if ok, why := heads.Fresh(); !ok {
					return errors.New(why)
				}
				return nil
			}}},
			Close: func() {
				_ = w.Close() // the server stopped: flush every receipt handed out
				c.Close()
				_ = dconn.Close()
				_ = rconn.Close()
			},
		}, nil
	})
}

// receiptSkew is the clock-skew allowance a retired receipt key is kept
// published for beyond the longest receipt lifetime.
const receiptSkew = 5 * time.Second

// receiptSigning opens the ring ALLOW receipts are signed with: the key
// file, or keys in memory without one. A signed receipt lives at most one
// validity window (valid_until is never later than the replica's freshness
// bound), so that is the ring's longest token lifetime.
func receiptSigning(ctx context.Context, cfg Config) (*grpcapi.Signing, error) {
	var src keyring.Source = &keyring.Memory{}
	if cfg.ReceiptKeyFile != "" {
		src = keyring.NewFile(cfg.ReceiptKeyFile)
	}
	ring, err := keyring.NewRing(ctx, src, keyring.Options{Lifetime: cfg.ValidityWindow, RotateEvery: cfg.ReceiptKeyRotateEvery,
		Skew: receiptSkew, SignLag: cfg.ReceiptKeyCheckInterval})
	if err != nil {
		return nil, fmt.Errorf("receipt signing keys: %w", err)
	}
	return &grpcapi.Signing{Ring: ring, MaxLifetime: cfg.ValidityWindow}, nil
}

// Migrate runs admission's migrations and returns (`admission migrate`).
func Migrate(ctx context.Context, cfg Config) error {
	return service.Migrate(ctx, spec(), cfg.Common)
}
