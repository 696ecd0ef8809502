package rpcserver

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// whoDesc has a unary and a streaming method that pass through the
// interceptors and do nothing.
var whoDesc = grpc.ServiceDesc{
	ServiceName: "toolcrib.test.v1.WhoService",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Who",
		Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(context.Context, any) (any, error) { return &emptypb.Empty{}, nil }
			return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/toolcrib.test.v1.WhoService/Who"}, h)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Follow",
		ServerStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			in := new(emptypb.Empty)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			return ss.SendMsg(&emptypb.Empty{})
		},
	}},
}

// With --access-log, the access log line of every call names the verified caller's subject
// and tenant, for unary and streaming calls; never the token. A call whose
// token is refused is logged without a caller.
func TestAccessLogNamesTheCaller(t *testing.T) {
	auth := servicetest.NewAuth(t)
	v, err := principal.LoadVerifier(auth.JWKSPath, principal.VerifierConfig{Issuer: servicetest.Issuer, Audience: servicetest.Audience})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs strings.Builder
	var mu sync.Mutex
	srv, err := New(Options{
		Service:       "test",
		HealthNames:   []string{"toolcrib.test.v1.TestService"},
		ListenAddr:    "127.0.0.1:0",
		Logger:        slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil)),
		CheckInterval: 50 * time.Millisecond,
		AccessLog:     true, // successful calls are logged only with it
		Unary:         []grpc.UnaryServerInterceptor{v.UnaryServerInterceptor()},
		Stream:        []grpc.StreamServerInterceptor{v.StreamServerInterceptor()},
		Register:      func(s *grpc.Server) { s.RegisterService(&whoDesc, struct{}{}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	waitStatus(t, srv.Addr().String(), healthpb.HealthCheckResponse_SERVING, 5*time.Second)

	call := func(token string, stream bool) error {
		t.Helper()
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if token != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(principal.BearerToken(token)))
		}
		conn, err := grpc.NewClient(srv.Addr().String(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if !stream {
			return conn.Invoke(ctx, "/toolcrib.test.v1.WhoService/Who", new(emptypb.Empty), new(emptypb.Empty))
		}
		s, err := conn.NewStream(ctx, &whoDesc.Streams[0], "/toolcrib.test.v1.WhoService/Follow")
		if err != nil {
			return err
		}
		if err := s.SendMsg(&emptypb.Empty{}); err != nil {
			return err
		}
		if err := s.CloseSend(); err != nil {
			return err
		}
		for {
			if err := s.RecvMsg(new(emptypb.Empty)); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
		}
	}
	alice := auth.User(t, "alice@example.com", "tenant-a", "readers")
	if err := call(alice, false); err != nil {
		t.Fatal(err)
	}
	if err := call(auth.User(t, "bob", "tenant-b"), true); err != nil {
		t.Fatal(err)
	}
	if err := call("not-a-token", false); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("bad token: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	logged := logs.String()
	mu.Unlock()
	lines := map[string]string{}
	for _, l := range strings.Split(logged, "\n") {
		if strings.Contains(l, `msg="finished call"`) {
			switch {
			case strings.Contains(l, "grpc.method=Who") && strings.Contains(l, "grpc.code=OK"):
				lines["who"] = l
			case strings.Contains(l, "grpc.method=Follow"):
				lines["follow"] = l
			case strings.Contains(l, "grpc.code=Unauthenticated"):
				lines["refused"] = l
			}
		}
	}
	for name, want := range map[string][]string{
		"who":    {"caller.subject=alice@example.com", "caller.tenant=tenant-a"},
		"follow": {"caller.subject=bob", "caller.tenant=tenant-b"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[name], w) {
				t.Errorf("%s call's access log lacks %q: %q", name, w, lines[name])
			}
		}
	}
	if l := lines["refused"]; l == "" || strings.Contains(l, "caller.") {
		t.Errorf("refused call's access log: %q", l)
	}
	if strings.Contains(logged, alice) || strings.Contains(logged, "not-a-token") {
		t.Errorf("a token reached the log:\n%s", logged)
	}
}

// A subject longer than the bound is cut, so one log line stays bounded.
func TestCallerIsBounded(t *testing.T) {
	long := strings.Repeat("é", 200)
	got := bounded(long)
	if len(got) > maxCallerLen+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Fatalf("bounded: %d bytes %q", len(got), got)
	}
	if bounded("alice") != "alice" {
		t.Fatal("a short subject changed")
	}
}

// A stream the server ends UNAVAILABLE while it drains (a Watch: resume
// elsewhere) is logged at INFO, the expected end of a stop; the same code
// before the stop is a WARN.
func TestDrainEndedStreamsAreNotWarnings(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs strings.Builder
	var mu sync.Mutex
	var srv *Server
	var calls atomic.Int32
	follow := grpc.ServiceDesc{
		ServiceName: "toolcrib.test.v1.FollowService",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    "Follow",
			ServerStreams: true,
			Handler: func(_ any, ss grpc.ServerStream) error {
				in := new(emptypb.Empty)
				if err := ss.RecvMsg(in); err != nil {
					return err
				}
				if err := ss.SendMsg(&emptypb.Empty{}); err != nil {
					return err
				}
				if calls.Add(1) == 1 {
					return status.Error(codes.Unavailable, "not draining")
				}
				select {
				case <-srv.Draining():
					return status.Error(codes.Unavailable, "draining: resume elsewhere")
				case <-time.After(30 * time.Second):
					return status.Error(codes.DeadlineExceeded, "no drain")
				}
			},
		}},
	}
	srv, err := New(Options{
		Service:       "test",
		HealthNames:   []string{"toolcrib.test.v1.TestService"},
		ListenAddr:    "127.0.0.1:0",
		Logger:        slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil)),
		CheckInterval: 50 * time.Millisecond,
		Register:      func(s *grpc.Server) { s.RegisterService(&follow, struct{}{}) },
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
	open := func() grpc.ClientStream {
		s, err := conn.NewStream(context.Background(), &follow.Streams[0], "/toolcrib.test.v1.FollowService/Follow")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMsg(&emptypb.Empty{}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecvMsg(new(emptypb.Empty)); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := open().RecvMsg(new(emptypb.Empty)); status.Code(err) != codes.Unavailable {
		t.Fatalf("before the stop: %v", err)
	}
	s := open()
	cancel()
	if err := s.RecvMsg(new(emptypb.Empty)); status.Code(err) != codes.Unavailable {
		t.Fatalf("during the drain: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	var before, during string
	for line := range strings.Lines(out) {
		switch {
		case strings.Contains(line, "not draining"):
			before = line
		case strings.Contains(line, "resume elsewhere"):
			during = line
		}
	}
	if !strings.Contains(before, "level=WARN") {
		t.Errorf("UNAVAILABLE before the stop not a warning: %q", before)
	}
	if !strings.Contains(during, "level=INFO") {
		t.Errorf("UNAVAILABLE of a stream ended by the drain not at INFO: %q\n%s", during, out)
	}
}
