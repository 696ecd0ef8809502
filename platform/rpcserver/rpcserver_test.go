package rpcserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// gate is a loopback TCP proxy to Postgres that can be cut: while closed it
// accepts and immediately drops connections, as an unreachable server would
// look to a client with a short connect timeout.
type gate struct {
	lis    net.Listener
	target string
	open   atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func newGate(t *testing.T, target string) *gate {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{lis: lis, target: target}
	t.Cleanup(func() { lis.Close(); g.cut() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			if !g.open.Load() {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			g.mu.Lock()
			g.conns = append(g.conns, c, up)
			g.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return g
}

// cut closes the gate and every proxied connection.
func (g *gate) cut() {
	g.open.Store(false)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.conns {
		c.Close()
	}
	g.conns = nil
}

func healthStatus(ctx context.Context, t *testing.T, addr string) healthpb.HealthCheckResponse_ServingStatus {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "toolcrib.test.v1.TestService"})
	if err != nil {
		t.Fatalf("health check: %v", err)
	}
	return resp.Status
}

func waitStatus(t *testing.T, addr string, want healthpb.HealthCheckResponse_ServingStatus, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		got := healthStatus(ctx, t, addr)
		cancel()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("health status %v after %v, want %v", got, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHealthFollowsPostgres: NOT_SERVING while Postgres is unreachable,
// SERVING once it answers, NOT_SERVING again when it stops answering.
func TestHealthFollowsPostgres(t *testing.T) {
	u := pgtest.ServerURL()
	host := "127.0.0.1:5432"
	if h := hostOf(u); h != "" {
		host = h
	}
	g := newGate(t, host)
	dsn := strings.Replace(u, host, g.lis.Addr().String(), 1)
	if !strings.Contains(dsn, "connect_timeout") {
		dsn += map[bool]string{true: "&", false: "?"}[strings.Contains(dsn, "?")] + "connect_timeout=1"
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := postgres.Open(ctx, dsn, "public")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var readyRuns atomic.Int32
	srv, err := New(Options{
		Service:       "test",
		HealthNames:   []string{"toolcrib.test.v1.TestService"},
		ListenAddr:    "127.0.0.1:0",
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Checks:        []Check{{Name: "postgres", Func: pool.Ping}},
		CheckInterval: 100 * time.Millisecond,
		Ready:         func(context.Context) error { readyRuns.Add(1); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	addr := srv.Addr().String()

	// Unreachable: stays NOT_SERVING over many check intervals.
	for range 10 {
		if st := healthStatus(ctx, t, addr); st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("status %v while Postgres is unreachable", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if readyRuns.Load() != 0 {
		t.Fatal("start-up step ran before Postgres answered")
	}
	g.open.Store(true)
	waitStatus(t, addr, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	if readyRuns.Load() != 1 {
		t.Fatalf("start-up step ran %d times, want 1", readyRuns.Load())
	}
	g.cut()
	waitStatus(t, addr, healthpb.HealthCheckResponse_NOT_SERVING, 10*time.Second)
	g.open.Store(true)
	waitStatus(t, addr, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	if readyRuns.Load() != 1 {
		t.Fatalf("start-up step ran %d times after recovery, want 1", readyRuns.Load())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func hostOf(u string) string {
	_, rest, ok := strings.Cut(u, "@")
	if !ok {
		return ""
	}
	h, _, _ := strings.Cut(rest, "/")
	return h
}

// slowDesc is a one-method service whose Sleep call takes the requested time.
var slowDesc = grpc.ServiceDesc{
	ServiceName: "toolcrib.test.v1.TestService",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Panic",
		Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(context.Context, any) (any, error) { panic("handler bug with secret detail") }
			return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/toolcrib.test.v1.TestService/Panic"}, h)
		},
	}, {
		MethodName: "Echo",
		Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(context.Context, any) (any, error) { return &emptypb.Empty{}, nil }
			return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/toolcrib.test.v1.TestService/Echo"}, h)
		},
	}, {
		MethodName: "Sleep",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(durationpb.Duration)
			if err := dec(in); err != nil {
				return nil, err
			}
			fmt.Println("CALL STARTED")
			select {
			case <-time.After(in.AsDuration()):
				return &emptypb.Empty{}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Follow",
		ServerStreams: true,
		Handler: func(_ any, stream grpc.ServerStream) error {
			return stream.SendMsg(&emptypb.Empty{})
		},
	}},
}

// TestDrainHelperProcess is the server process of TestSIGTERMDrains.
func TestDrainHelperProcess(t *testing.T) {
	if os.Getenv("TOOLCRIB_DRAIN_HELPER") == "" {
		t.Skip("helper process for TestSIGTERMDrains")
	}
	timeout, _ := time.ParseDuration(os.Getenv("TOOLCRIB_DRAIN_HELPER"))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	srv, err := New(Options{
		Service:         "test",
		ListenAddr:      "127.0.0.1:0",
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, nil)),
		CheckInterval:   50 * time.Millisecond,
		ShutdownTimeout: timeout,
		Register:        func(s *grpc.Server) { s.RegisterService(&slowDesc, struct{}{}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ADDR", srv.Addr())
	if err := srv.Run(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("EXITED")
}

// runDrain starts the helper, makes one Sleep(call) call, sends SIGTERM once
// the call is in flight, and returns the call's error, when it ended and
// when the process exited.
func runDrain(t *testing.T, shutdownTimeout, call time.Duration) (callErr error, callEnd, exit time.Time, stderr string) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestDrainHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "TOOLCRIB_DRAIN_HELPER="+shutdownTimeout.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errBuf strings.Builder
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var addr string
	for l := range lines {
		if a, ok := strings.CutPrefix(l, "ADDR "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatalf("helper printed no address; stderr: %s", errBuf.String())
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	type result struct {
		err error
		at  time.Time
	}
	res := make(chan result, 1)
	go func() {
		err := conn.Invoke(context.Background(), "/toolcrib.test.v1.TestService/Sleep", durationpb.New(call), new(emptypb.Empty))
		res <- result{err, time.Now()}
	}()
	for l := range lines {
		if l == "CALL STARTED" {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range lines {
		}
	}()
	r := <-res
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper exited with %v; stderr: %s", err, errBuf.String())
	}
	return r.err, r.at, time.Now(), errBuf.String()
}

// TestSIGTERMDrains: SIGTERM lets an in-flight call finish before exit.
func TestSIGTERMDrains(t *testing.T) {
	callErr, callEnd, exit, stderr := runDrain(t, 10*time.Second, 1500*time.Millisecond)
	if callErr != nil {
		t.Fatalf("in-flight call failed during drain: %v", callErr)
	}
	if exit.Before(callEnd) {
		t.Fatal("process exited before the in-flight call finished")
	}
	if !strings.Contains(stderr, "draining in-flight calls") || !strings.Contains(stderr, "drained; stopped") {
		t.Fatalf("shutdown not logged; stderr: %s", stderr)
	}
}

// TestSIGTERMDrainDeadline: a call longer than the drain deadline is cut
// and the process still exits.
func TestSIGTERMDrainDeadline(t *testing.T) {
	start := time.Now()
	callErr, _, _, stderr := runDrain(t, 500*time.Millisecond, time.Minute)
	if code := status.Code(callErr); code != codes.Unavailable && code != codes.Canceled {
		t.Fatalf("call outliving the drain deadline ended with %v, want Unavailable or Canceled", callErr)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatal("process did not stop at the drain deadline")
	}
	if !strings.Contains(stderr, "drain deadline passed") {
		t.Fatalf("forced stop not logged; stderr: %s", stderr)
	}
}

// TestPanicRecoveryAndMetrics: a panicking handler answers Internal without
// its detail, the server keeps serving, and /metrics counts the calls.
func TestPanicRecoveryAndMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs strings.Builder
	var mu sync.Mutex
	srv, err := New(Options{
		Service:       "test",
		HealthNames:   []string{"toolcrib.test.v1.TestService"},
		ListenAddr:    "127.0.0.1:0",
		MetricsAddr:   "127.0.0.1:0",
		Logger:        slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil)),
		CheckInterval: 50 * time.Millisecond,
		Register:      func(s *grpc.Server) { s.RegisterService(&slowDesc, struct{}{}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	waitStatus(t, srv.Addr().String(), healthpb.HealthCheckResponse_SERVING, 5*time.Second)
	conn, err := grpc.NewClient(srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for range 2 {
		err := conn.Invoke(ctx, "/toolcrib.test.v1.TestService/Panic", new(emptypb.Empty), new(emptypb.Empty))
		st, _ := status.FromError(err)
		if st.Code() != codes.Internal || strings.Contains(st.Message(), "secret") {
			t.Fatalf("panic answered %v %q", st.Code(), st.Message())
		}
	}
	if err := conn.Invoke(ctx, "/toolcrib.test.v1.TestService/Sleep", durationpb.New(0), new(emptypb.Empty)); err != nil {
		t.Fatalf("server stopped serving after a panic: %v", err)
	}
	resp, err := http.Get("http://" + srv.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `grpc_server_handled_total{grpc_code="Internal",grpc_method="Panic",grpc_service="toolcrib.test.v1.TestService",grpc_type="unary"} 2`) {
		t.Fatalf("metrics do not count the two failed calls:\n%s", body)
	}
	mu.Lock()
	logged := logs.String()
	mu.Unlock()
	if !strings.Contains(logged, "panic in handler") || !strings.Contains(logged, "handler bug with secret detail") {
		t.Fatalf("panic not logged: %s", logged)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// callCode calls Echo and opens Follow and returns the codes and ErrorInfo
// reasons of both.
func callCode(ctx context.Context, t *testing.T, conn *grpc.ClientConn) (unary, stream string) {
	t.Helper()
	describe := func(err error) string {
		st, _ := status.FromError(err)
		out := st.Code().String()
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				out += " " + info.GetReason()
			}
		}
		return out
	}
	unary = describe(conn.Invoke(ctx, "/toolcrib.test.v1.TestService/Echo", new(emptypb.Empty), new(emptypb.Empty)))
	cs, err := conn.NewStream(ctx, &slowDesc.Streams[0], "/toolcrib.test.v1.TestService/Follow")
	if err != nil {
		return unary, describe(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	return unary, describe(cs.RecvMsg(new(emptypb.Empty)))
}

// TestCallsWaitForStartUp: until the start-up step (migrations) has
// succeeded no handler runs, so none runs against a schema that is not
// there yet: unary and streaming calls wait for it up to StartWait and are
// then refused with UNAVAILABLE STARTING, while health answers NOT_SERVING;
// a call waiting when the step succeeds is served, and so is every later
// one. Checks of the service's own state (StateChecks) hold back SERVING,
// not the start-up step or the calls.
func TestCallsWaitForStartUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	var caughtUp atomic.Bool
	srv, err := New(Options{
		Service:     "test",
		HealthNames: []string{"toolcrib.test.v1.TestService"},
		ListenAddr:  "127.0.0.1:0",
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Checks:      []Check{{Name: "postgres", Func: func(context.Context) error { return nil }}},
		StateChecks: []Check{{Name: "watch", Func: func(context.Context) error {
			if !caughtUp.Load() {
				return errors.New("not caught up")
			}
			return nil
		}}},
		CheckInterval: 50 * time.Millisecond,
		StartWait:     300 * time.Millisecond,
		Ready: func(ctx context.Context) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		Register: func(s *grpc.Server) { s.RegisterService(&slowDesc, struct{}{}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	addr := srv.Addr().String()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	for range 5 {
		if u, st := callCode(ctx, t, conn); u != "Unavailable STARTING" || st != "Unavailable STARTING" {
			t.Fatalf("before the start-up step finished: unary %q, stream %q; want Unavailable STARTING for both", u, st)
		}
		if st := healthStatus(ctx, t, addr); st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("health %v before the start-up step finished", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A call that arrives while starting and is still waiting when the step
	// succeeds is served (StartWait is 300 ms: release well within it).
	waited := make(chan string, 1)
	go func() {
		st, _ := status.FromError(conn.Invoke(ctx, "/toolcrib.test.v1.TestService/Echo", new(emptypb.Empty), new(emptypb.Empty)))
		waited <- st.Code().String()
	}()
	servicetest.Eventually(t, 5*time.Second, "the call to wait in the start-up gate", func() bool { return srv.gate.waiting.Load() == 1 })
	close(release)
	if got := <-waited; got != "OK" {
		t.Fatalf("a call waiting when the start-up step succeeded: %s, want OK", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		u, st := callCode(ctx, t, conn)
		if u == "OK" && st == "OK" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the start-up step: unary %q, stream %q; want OK", u, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Calls are served although the state check still fails.
	if st := healthStatus(ctx, t, addr); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health %v while a state check fails", st)
	}
	caughtUp.Store(true)
	waitStatus(t, addr, healthpb.HealthCheckResponse_SERVING, 5*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestDegradableDependency: a Degradable check gates the first SERVING like
// any other; after that its failure keeps the status SERVING and shows in
// toolcrib_dependency_up, while a plain check's failure still turns it
// NOT_SERVING.
func TestDegradableDependency(t *testing.T) {
	var cacheUp, dbUp atomic.Bool
	dbUp.Store(true)
	probe := func(b *atomic.Bool) func(context.Context) error {
		return func(context.Context) error {
			if b.Load() {
				return nil
			}
			return errors.New("connection refused")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := New(Options{
		Service:       "test",
		HealthNames:   []string{"toolcrib.test.v1.TestService"},
		ListenAddr:    "127.0.0.1:0",
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Checks:        []Check{{Name: "db", Func: probe(&dbUp)}, {Name: "cache", Func: probe(&cacheUp), Degradable: true}},
		CheckInterval: 50 * time.Millisecond,
		Ready:         func(context.Context) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	addr := srv.Addr().String()
	up := func(dep string) float64 {
		t.Helper()
		mfs, err := srv.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "toolcrib_dependency_up" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "dependency" && l.GetValue() == dep {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		t.Fatalf("no toolcrib_dependency_up{dependency=%q}", dep)
		return 0
	}

	for range 5 {
		if st := healthStatus(ctx, t, addr); st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("status %v before the degradable dependency ever answered", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cacheUp.Store(true)
	waitStatus(t, addr, healthpb.HealthCheckResponse_SERVING, 5*time.Second)
	cacheUp.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for up("cache") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("toolcrib_dependency_up{dependency=cache} still 1 after the cache stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 5 {
		if st := healthStatus(ctx, t, addr); st != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("status %v with only the degradable dependency down", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	dbUp.Store(false)
	waitStatus(t, addr, healthpb.HealthCheckResponse_NOT_SERVING, 5*time.Second)
	dbUp.Store(true)
	cacheUp.Store(true)
	waitStatus(t, addr, healthpb.HealthCheckResponse_SERVING, 5*time.Second)
	if up("cache") != 1 || up("db") != 1 {
		t.Fatalf("dependency_up cache=%v db=%v after both answer", up("cache"), up("db"))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
