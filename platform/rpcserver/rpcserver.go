package rpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/tlsconfig"
)

// Check is one dependency the service needs to serve, e.g. a Postgres ping.
type Check struct {
	// Name is logged when the check fails, e.g. `postgres`.
	Name string
	// Func returns nil when the dependency answers.
	Func func(context.Context) error
	// Degradable marks a dependency the service answers correctly without,
	// only slower (admission's Redis L2: decisions come from L1 and direct
	// reads meanwhile). It must answer once before the first SERVING, like
	// every check; after that its failure keeps the status SERVING, is
	// logged once per outage at warn and sets toolcrib_dependency_up to 0.
	// Taking every replica out of rotation for it would turn a slower
	// service into none.
	Degradable bool
}

// Options configure a [Server].
type Options struct {
	// Service is the service name (`registry`); used in logs and metrics.
	Service string
	// HealthNames are the names whose health status tracks the checks, e.g.
	// `toolcrib.registry.v1.RegistryService`. The overall status ("") always
	// does.
	HealthNames []string
	// ListenAddr is the gRPC address.
	ListenAddr string
	// MetricsAddr is the /metrics HTTP address; empty disables it.
	MetricsAddr string
	// TLS, when set, makes the gRPC listener TLS (mTLS when it has client
	// CAs); nil serves plaintext.
	TLS *tlsconfig.Server
	// MetricsTLS serves /metrics over TLS with TLS's certificate and its
	// client-certificate requirement; it needs TLS.
	MetricsTLS bool
	// Logger logs calls and lifecycle events.
	Logger *slog.Logger
	// Checks are the service's dependencies (Postgres, Redis): all must
	// pass for Ready to run and for the service to report SERVING.
	Checks []Check
	// StateChecks are the service's own state (e.g. a Watch stream caught
	// up): all must pass, after Checks, for SERVING, but neither Ready nor
	// accepting calls waits for them (a replica that is not caught up
	// answers, and says so in its answers).
	StateChecks []Check
	// CheckInterval is how often the checks run.
	CheckInterval time.Duration
	// Ready runs once, the first time every check of Checks passes, before
	// the status becomes SERVING (e.g. migrations). It is retried on the
	// next check interval while it fails. Until it has succeeded no call
	// but health and reflection reaches a handler: a call waits for it for
	// up to StartWait, then is refused with UNAVAILABLE, reason
	// [ReasonStarting]. Without Ready calls are accepted from the start.
	Ready func(context.Context) error
	// StartWait bounds how long a call arriving before Ready succeeded
	// waits for it (2s).
	StartWait time.Duration
	// ShutdownTimeout bounds the graceful drain.
	ShutdownTimeout time.Duration
	// Unary and Stream are added after the shared interceptors (e.g.
	// authentication), in order. The principal they leave in the context
	// (platform/principal) is named in the access log: caller.subject and
	// caller.tenant.
	Unary  []grpc.UnaryServerInterceptor
	Stream []grpc.StreamServerInterceptor
	// Register adds the service implementations.
	Register func(*grpc.Server)
	// Registerer receives extra service metrics; nil creates a registry.
	Registerer *prometheus.Registry
	// AccessLog logs every finished call at info, a successful one
	// included (`--access-log`). Without it a call that succeeded — or that
	// its caller cancelled, as a Watch stream's consumer does when it
	// reconnects — is logged at debug, and only failures reach info and
	// above: the log says what a person running the service wants to
	// follow, not every internal poll.
	AccessLog bool
	// StreamWorkers, when positive, serves calls on that many reused
	// goroutines (grpc.NumStreamWorkers) instead of one new goroutine per
	// call: a handler with a deep stack (interceptors, then the service)
	// then grows a worker's stack once, not every call's. Calls beyond the
	// busy workers still get their own goroutine. 0 for grpc's default.
	StreamWorkers int
}

// Server is a gRPC server with health, reflection, metrics and a drain.
type Server struct {
	opts     Options
	grpc     *grpc.Server
	health   *health.Server
	lis      net.Listener
	metrics  *http.Server
	mlis     net.Listener
	reg      *prometheus.Registry
	draining chan struct{}
	gate     *startGate

	up       *prometheus.GaugeVec
	stopping *atomic.Bool
	mu       sync.Mutex
	serving  bool
	ready    bool
	reported map[string]bool
	degraded map[string]bool
}

// New listens on the configured addresses and builds the server; nothing
// is served until [Server.Run].
func New(opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = 2 * time.Second
	}
	if opts.StartWait <= 0 {
		opts.StartWait = 2 * time.Second
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 15 * time.Second
	}
	reg := opts.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srvMetrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets([]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}),
	))
	reg.MustRegister(srvMetrics)
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolcrib_dependency_up",
		Help: "1 when the dependency answered its last check, 0 when not (Postgres, Redis).",
	}, []string{"dependency"})
	reg.MustRegister(up)
	for _, c := range opts.Checks {
		up.WithLabelValues(c.Name).Set(0)
	}

	logger := opts.Logger
	// While the server drains, the streams it ends (Watch: UNAVAILABLE
	// DRAINING, resume elsewhere) are the expected end of a stop, not a
	// warning.
	var stopping atomic.Bool
	level := func(code codes.Code) logging.Level {
		return callLevel(code, opts.AccessLog, stopping.Load())
	}
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall), logging.WithFieldsFromContext(callerFields), logging.WithLevels(level)}
	panicHandler := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		logger.ErrorContext(ctx, "panic in handler", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return &apierror.Error{Code: codes.Internal, Message: "internal error"}
	})
	// Health probes are frequent and say nothing new; they are not logged.
	notHealth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return c.Service != healthpb.Health_ServiceDesc.ServiceName
	})
	gate := newStartGate(opts.Ready == nil, opts.StartWait)
	unary := []grpc.UnaryServerInterceptor{
		callerSlotUnary,
		selector.UnaryServerInterceptor(quietUnary(logger, opts.AccessLog, logging.UnaryServerInterceptor(slogLogger(logger), logOpts...)), notHealth),
		srvMetrics.UnaryServerInterceptor(),
		recovery.UnaryServerInterceptor(panicHandler),
		apierror.UnaryServerInterceptor(logger),
		gate.unary,
	}
	unary = append(append(unary, opts.Unary...), noteCallerUnary)
	stream := []grpc.StreamServerInterceptor{
		callerSlotStream,
		selector.StreamServerInterceptor(logging.StreamServerInterceptor(slogLogger(logger), logOpts...), notHealth),
		srvMetrics.StreamServerInterceptor(),
		recovery.StreamServerInterceptor(panicHandler),
		apierror.StreamServerInterceptor(logger),
		gate.stream,
	}
	stream = append(append(stream, opts.Stream...), noteCallerStream)

	sopts := []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler()),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	}
	if opts.TLS != nil {
		sopts = append(sopts, grpc.Creds(opts.TLS.GRPC()))
	}
	if opts.MetricsTLS && opts.TLS == nil {
		return nil, errors.New("rpcserver: metrics over TLS needs a server certificate")
	}
	if opts.StreamWorkers > 0 {
		sopts = append(sopts, grpc.NumStreamWorkers(uint32(opts.StreamWorkers)))
	}
	g := grpc.NewServer(sopts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(g, hs)
	reflection.Register(g)
	if opts.Register != nil {
		opts.Register(g)
	}
	srvMetrics.InitializeMetrics(g)
	s := &Server{opts: opts, grpc: g, health: hs, reg: reg, draining: make(chan struct{}), gate: gate, up: up, stopping: &stopping}
	s.setStatus(false)

	lis, err := net.Listen("tcp", opts.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("rpcserver: listen %s: %w", opts.ListenAddr, err)
	}
	s.lis = lis
	if opts.MetricsAddr != "" {
		mlis, err := net.Listen("tcp", opts.MetricsAddr)
		if err != nil {
			lis.Close()
			return nil, fmt.Errorf("rpcserver: listen %s: %w", opts.MetricsAddr, err)
		}
		s.mlis = mlis
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		s.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		if opts.MetricsTLS {
			s.metrics.TLSConfig = opts.TLS.Config(true, "h2", "http/1.1")
		}
	}
	return s, nil
}

// Addr is the address the gRPC server listens on.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// MetricsAddr is the address of /metrics; nil when disabled.
func (s *Server) MetricsAddr() net.Addr {
	if s.mlis == nil {
		return nil
	}
	return s.mlis.Addr()
}

// Registry is the Prometheus registry of the server's metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Draining is closed when shutdown starts. Long-running streaming handlers
// (Watch) return when it closes so the drain can finish.
func (s *Server) Draining() <-chan struct{} { return s.draining }

// Serving reports whether the health status is SERVING.
func (s *Server) Serving() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serving
}

func (s *Server) setStatus(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	for _, n := range s.opts.HealthNames {
		s.health.SetServingStatus(n, st)
	}
}

// Run serves until ctx ends, then drains and stops. It returns nil after a
// clean shutdown.
func (s *Server) Run(ctx context.Context) error {
	log := s.opts.Logger
	errc := make(chan error, 2)
	go func() { errc <- s.grpc.Serve(s.lis) }()
	if s.metrics != nil {
		// Serve writes the server's TLSConfig (ALPN): decide before it runs.
		serve := s.metrics.Serve
		if s.opts.MetricsTLS {
			serve = func(l net.Listener) error { return s.metrics.ServeTLS(l, "", "") }
		}
		go func() {
			if err := serve(s.mlis); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	attrs := []any{"grpc", s.lis.Addr().String(), "tls", s.opts.TLS != nil, "mtls", s.opts.TLS.MutualTLS()}
	if s.mlis != nil {
		scheme := "http://"
		if s.opts.MetricsTLS {
			scheme = "https://"
		}
		attrs = append(attrs, "metrics", scheme+s.mlis.Addr().String()+"/metrics")
	}
	log.InfoContext(ctx, "listening", attrs...)

	checkCtx, stopChecks := context.WithCancel(ctx)
	defer stopChecks()
	checksDone := make(chan struct{})
	go func() {
		defer close(checksDone)
		s.checkLoop(checkCtx)
	}()

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-errc:
		runErr = fmt.Errorf("rpcserver: serve: %w", err)
	}
	stopChecks()
	<-checksDone
	s.shutdown()
	return runErr
}

func (s *Server) shutdown() {
	log := s.opts.Logger
	log.Info("shutting down: NOT_SERVING, draining in-flight calls", "deadline", s.opts.ShutdownTimeout)
	s.mu.Lock()
	s.serving = false
	s.mu.Unlock()
	s.health.Shutdown()
	s.stopping.Store(true)
	close(s.draining)
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		log.Info("drained; stopped")
	case <-time.After(s.opts.ShutdownTimeout):
		log.Warn("drain deadline passed; stopping remaining calls")
		s.grpc.Stop()
		<-done
	}
	if s.metrics != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.metrics.Shutdown(ctx)
	}
}

func (s *Server) checkLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.CheckInterval)
	defer t.Stop()
	for {
		s.runChecks(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) runChecks(ctx context.Context) {
	log := s.opts.Logger
	ok, cancelled := s.passes(ctx, s.opts.Checks)
	if cancelled {
		return
	}
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if ok && !ready {
		if s.opts.Ready != nil {
			if err := s.opts.Ready(ctx); err != nil {
				if ctx.Err() == nil {
					log.WarnContext(ctx, "start-up step failed; will retry", "error", err)
				}
				ok = false
			}
		}
		if ok {
			s.mu.Lock()
			s.ready = true
			s.mu.Unlock()
			s.gate.openUp()
		}
	}
	if ok {
		if ok, cancelled = s.passes(ctx, s.opts.StateChecks); cancelled {
			return
		}
	}
	s.mu.Lock()
	changed := s.serving != ok
	s.serving = ok
	if ok {
		s.reported = nil
	}
	s.mu.Unlock()
	if changed && ctx.Err() == nil {
		s.setStatus(ok)
		if ok {
			log.InfoContext(ctx, "dependencies answer; SERVING")
		}
	}
}

// passes runs checks in order until one fails; cancelled is true when ctx
// ended meanwhile (nothing is to be concluded then). Once the service has
// been ready, a failing Degradable check is reported and skipped.
func (s *Server) passes(ctx context.Context, checks []Check) (ok, cancelled bool) {
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(ctx, s.opts.CheckInterval)
		err := c.Func(cctx)
		cancel()
		if err != nil && ctx.Err() != nil {
			return false, true
		}
		if s.up != nil {
			s.up.WithLabelValues(c.Name).Set(map[bool]float64{true: 1, false: 0}[err == nil])
		}
		s.mu.Lock()
		ready, wasDegraded := s.ready, s.degraded[c.Name]
		if c.Degradable && ready {
			if s.degraded == nil {
				s.degraded = map[string]bool{}
			}
			s.degraded[c.Name] = err != nil
		}
		s.mu.Unlock()
		if c.Degradable && ready {
			switch {
			case err != nil && !wasDegraded:
				s.opts.Logger.WarnContext(ctx, "dependency not answering; still SERVING, degraded", "dependency", c.Name, "error", err)
			case err == nil && wasDegraded:
				s.opts.Logger.InfoContext(ctx, "dependency answers again", "dependency", c.Name)
			}
			continue
		}
		if err != nil {
			if s.Serving() || !s.wasReported(c.Name) {
				s.opts.Logger.WarnContext(ctx, "dependency not answering; NOT_SERVING", "dependency", c.Name, "error", err)
			}
			return false, false
		}
	}
	return true, false
}

// wasReported keeps the log quiet while a dependency stays down at start-up:
// only the first failure of each check is logged until it recovers.
func (s *Server) wasReported(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reported == nil {
		s.reported = map[string]bool{}
	}
	r := s.reported[name]
	s.reported[name] = true
	return r
}

// callLevel is the level of a finished call's log line (see
// [Options.AccessLog]): OK and CANCELLED at debug unless the access log is
// on; UNAVAILABLE at info while the server stops (the streams it ends —
// Watch: UNAVAILABLE DRAINING, resume elsewhere — are the expected end of
// a stop, not a warning); any other code at the usual level for it (info
// for the caller's mistakes, warn for refusals and unavailability, error
// for the server's own faults).
func callLevel(code codes.Code, accessLog, stopping bool) logging.Level {
	switch {
	case code == codes.Unavailable && stopping:
		return logging.LevelInfo
	case code == codes.OK || code == codes.Canceled:
		if accessLog {
			return logging.LevelInfo
		}
		return logging.LevelDebug
	}
	return logging.DefaultServerCodeToLevel(code)
}

// quietUnary access-logs unary calls through logged. While neither debug
// nor the access log is on, an OK call (whose line would be at debug)
// skips logged altogether: building a line nobody reads was the largest
// cost of a cached AdmissionService.Check after the handler. Any other
// call is then logged through logged after the fact, with the handler's
// own time in grpc.handler_time_ms (logged's grpc.time_ms covers only the
// replay).
func quietUnary(logger *slog.Logger, accessLog bool, logged grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if accessLog || logger.Enabled(ctx, slog.LevelDebug) {
			return logged(ctx, req, info, h)
		}
		start := time.Now()
		resp, err := h(ctx, req)
		if err == nil {
			return resp, nil
		}
		ctx = context.WithValue(ctx, handlerTimeKey{}, time.Since(start))
		return logged(ctx, req, info, func(context.Context, any) (any, error) { return resp, err })
	}
}

// handlerTimeKey carries a replayed call's handler time to its log line.
type handlerTimeKey struct{}

func slogLogger(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}
