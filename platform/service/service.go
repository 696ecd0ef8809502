// Package service is the start-up and shutdown sequence every toolcrib
// service shares, written once: open the Postgres pool (and Redis), load the
// token verifier, build the gRPC server with health, reflection and the
// shared interceptors, migrate once Postgres answers, run the service's
// background loops, and on cancellation drain and close everything in
// reverse order.
//
// A service's Run is a thin call to [Run] with its [Spec] and a setup
// function that registers its gRPC implementation and returns its loops.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/platform/rpcserver"
	"github.com/toolcrib/toolcrib/platform/telemetry"
	"github.com/toolcrib/toolcrib/platform/tlsconfig"
)

// Spec describes one service.
type Spec struct {
	// Name is the service name, e.g. `registry`.
	Name string
	// Schema is its Postgres schema.
	Schema string
	// Migrations are its migration sets, in order.
	Migrations []postgres.Set
	// HealthNames are its gRPC service names, e.g.
	// `toolcrib.registry.v1.RegistryService`.
	HealthNames []string
	// UsesRedis makes Redis a dependency (pinged for health).
	UsesRedis bool
	// RedisDegradable keeps the service SERVING when Redis stops answering
	// after start-up (rpcserver.Check.Degradable): for a service that
	// decides correctly without it.
	RedisDegradable bool
	// StreamWorkers is rpcserver.Options.StreamWorkers: reused goroutines
	// for a service whose hot path has a deep stack; 0 for none.
	StreamWorkers int
}

// Deps are what Run opened for the service.
type Deps struct {
	// Pool is the service's Postgres pool (search_path = its schema).
	Pool *pgxpool.Pool
	// Redis is the Redis client; nil unless the spec uses Redis.
	Redis *redisclient.Client
	// Verifier checks bearer tokens.
	Verifier *principal.Verifier
	// Logger is the service's logger.
	Logger *slog.Logger
	// Draining is closed when shutdown starts; streaming handlers return.
	Draining <-chan struct{}
	// Transport is the transport security of every outgoing gRPC client
	// (grpc.WithTransportCredentials): TLS, with the client certificate
	// under mTLS, when configured; plaintext otherwise.
	Transport credentials.TransportCredentials
	// ServiceToken is the bearer token this service presents to other
	// toolcrib services (--service-token-file, re-read when it changes);
	// nil without a token file: the service is then known by its client
	// certificate (mTLS with --tls-service-identities on the callee).
	ServiceToken credentials.PerRPCCredentials
	// ServerTLS is the listeners' TLS material, for a service's own extra
	// listener (the gateway's MCP port); nil when plaintext.
	ServerTLS *tlsconfig.Server
	// ClientTLS is the outgoing TLS material (--tls-ca-file, the client
	// pair), for a service's own HTTPS client to its peers (the gateway's
	// replicas); nil when no client TLS is configured.
	ClientTLS *tlsconfig.Client
	// Metrics is the Prometheus registry served at /metrics (with the gRPC
	// and Go runtime metrics); the service registers its own metrics on it.
	Metrics *prometheus.Registry
}

// ServiceDialOptions are the dial options of a client that calls as this
// service: [Deps.Transport] and, when configured, [Deps.ServiceToken].
func (d *Deps) ServiceDialOptions() []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(d.Transport)}
	if d.ServiceToken != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(d.ServiceToken))
	}
	return opts
}

// Parts are what the service's setup returns.
type Parts struct {
	// Register adds the gRPC implementations.
	Register func(*grpc.Server)
	// Loops run in the background until ctx ends; an error from one stops
	// the service. They start at once: a loop that needs the database must
	// retry until it answers (migrations may not have run yet).
	Loops []func(ctx context.Context) error
	// Close releases what setup opened; called after the server stopped.
	Close func()
	// Checks are further health conditions of the service's own state
	// (e.g. a Watch stream caught up); all must pass, with Postgres and
	// Redis, for SERVING. Migrations and accepting calls wait only for
	// Postgres and Redis (rpcserver.Options.StateChecks).
	Checks []rpcserver.Check
}

// Run starts the service and blocks until ctx ends (nil after a clean stop)
// or a part fails.
func Run(ctx context.Context, spec Spec, c config.Common, setup func(ctx context.Context, d *Deps) (Parts, error)) error {
	logOut := c.LogOutput
	if logOut == nil {
		logOut = os.Stderr
	}
	logger := c.Logger(logOut, spec.Name)
	shutdownTracing, err := telemetry.Setup(ctx, spec.Name)
	if err != nil {
		return fmt.Errorf("%s: tracing: %w", spec.Name, err)
	}
	defer func() { _ = shutdownTracing(context.WithoutCancel(ctx)) }()

	verifier, err := NewVerifier(ctx, c, logger)
	if err != nil {
		return fmt.Errorf("%s: %w", spec.Name, err)
	}
	serverTLS, err := tlsconfig.NewServer(c.TLS, logger)
	if err != nil {
		return fmt.Errorf("%s: %w", spec.Name, err)
	}
	clientTLS, err := tlsconfig.NewClient(c.TLS, logger)
	if err != nil {
		return fmt.Errorf("%s: %w", spec.Name, err)
	}
	warnPlaintext(logger, c.TLS)
	pool, err := postgres.Open(ctx, c.PostgresURL, spec.Schema)
	if err != nil {
		return fmt.Errorf("%s: %w", spec.Name, err)
	}
	defer pool.Close()
	checks := []rpcserver.Check{{Name: "postgres", Func: pool.Ping}}
	d := &Deps{Pool: pool, Verifier: verifier, Logger: logger, Metrics: prometheus.NewRegistry(),
		Transport: clientTLS.TransportCredentials(), ServerTLS: serverTLS, ClientTLS: clientTLS}
	if c.ServiceTokenFile != "" {
		d.ServiceToken = &principal.FileToken{Path: c.ServiceTokenFile}
	}
	if spec.UsesRedis {
		if c.RedisAddr != "" {
			logger.Warn("--redis-addr (TOOLCRIB_REDIS_ADDR) is deprecated: use --redis-url (TOOLCRIB_REDIS_URL)")
		}
		r := c.Redis()
		d.Redis, err = redisclient.New(r, c.RedisPrefix)
		if err != nil {
			return fmt.Errorf("%s: %w", spec.Name, err)
		}
		logger.Info("redis", "url", redisclient.Redact(r.URL), "ack_replicas", d.Redis.AckReplicas())
		defer d.Redis.Close()
		checks = append(checks, rpcserver.Check{Name: "redis", Func: d.Redis.Check, Degradable: spec.RedisDegradable})
	}

	var srv *rpcserver.Server
	draining := make(chan struct{})
	d.Draining = draining
	parts, err := setup(ctx, d)
	if err != nil {
		return fmt.Errorf("%s: %w", spec.Name, err)
	}
	if parts.Close != nil {
		defer parts.Close()
	}
	var ready func(context.Context) error
	if c.Migrate {
		ready = func(ctx context.Context) error {
			return postgres.Migrate(ctx, pool, spec.Schema, logger, spec.Migrations...)
		}
	}
	srv, err = rpcserver.New(rpcserver.Options{
		Service:         spec.Name,
		HealthNames:     spec.HealthNames,
		ListenAddr:      c.ListenAddr,
		MetricsAddr:     c.MetricsAddr,
		TLS:             serverTLS,
		MetricsTLS:      c.MetricsTLS,
		Logger:          logger,
		Checks:          checks,
		StateChecks:     parts.Checks,
		CheckInterval:   c.DependencyCheckInterval,
		Ready:           ready,
		ShutdownTimeout: c.ShutdownTimeout,
		Unary:           []grpc.UnaryServerInterceptor{verifier.UnaryServerInterceptor()},
		Stream:          []grpc.StreamServerInterceptor{verifier.StreamServerInterceptor()},
		Register:        parts.Register,
		Registerer:      d.Metrics,
		AccessLog:       c.AccessLog,
		StreamWorkers:   spec.StreamWorkers,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", spec.Name, err)
	}
	go func() {
		<-srv.Draining()
		close(draining)
	}()
	if c.Listening != nil {
		c.Listening(srv.Addr().String())
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(gctx) })
	for _, loop := range parts.Loops {
		g.Go(func() error {
			if err := loop(gctx); err != nil && gctx.Err() == nil {
				return err
			}
			return nil
		})
	}
	return g.Wait()
}

// warnPlaintext logs, once at start-up, each side of the service that runs
// without TLS: plaintext is an opt-out (`toolcrib dev up --plaintext`, or
// no --tls-cert-file / --tls-ca-file), never silent.
func warnPlaintext(logger *slog.Logger, o tlsconfig.Options) {
	if !o.ServerEnabled() {
		logger.Warn("TLS is off: the listeners serve plaintext; bearer tokens, leases and receipts cross the network in the clear (set --" +
			tlsconfig.FlagCertFile + " and --" + tlsconfig.FlagKeyFile + ")")
	}
	if !o.ClientEnabled() {
		logger.Warn("TLS is off: calls to other toolcrib services are plaintext (set --" + tlsconfig.FlagCAFile + ")")
	}
}

// Migrate runs the spec's migrations once and returns; it is the `migrate`
// subcommand of each service's main.
func Migrate(ctx context.Context, spec Spec, c config.Common) error {
	logger := c.Logger(os.Stderr, spec.Name)
	pool, err := postgres.Open(ctx, c.PostgresURL, spec.Schema)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("%s: postgres: %w", spec.Name, err)
	}
	return postgres.Migrate(ctx, pool, spec.Schema, logger, spec.Migrations...)
}

// Command is the run function of a service's command line, `<name>
// [migrate] [flags]`: it parses the configuration (printing usage for -h),
// then migrates and exits, or runs the service until ctx ends.
func Command[C any](name string, parse func(args []string) (C, error), usage func() string,
	run, migrate func(context.Context, C) error) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		migrating := len(args) > 0 && args[0] == "migrate"
		if migrating {
			args = args[1:]
		}
		cfg, err := parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stdout, "Usage: %s [migrate] [flags]\n\n`%s migrate` applies the schema and exits; without it the service runs until SIGINT or SIGTERM.\n\nFlags:\n%s", name, name, usage())
			return err
		}
		if err != nil {
			return err
		}
		if migrating {
			return migrate(ctx, cfg)
		}
		return run(ctx, cfg)
	}
}

// Main runs a service command with the process's arguments until SIGINT or
// SIGTERM, and exits non-zero when it fails.
func Main(name string, command func(context.Context, []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := command(ctx, os.Args[1:])
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		}
		os.Exit(1)
	}
}
