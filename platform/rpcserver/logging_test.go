package rpcserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/emptypb"
)

// callLine is one finished-call line of the access log.
type callLine struct {
	Level  string `json:"level"`
	Msg    string `json:"msg"`
	Method string `json:"grpc.method"`
	Code   string `json:"grpc.code"`
	Kind   string `json:"grpc.method_type"`
}

// finishedCalls runs a server at level with the access log on or off,
// makes one successful unary call (Echo), one successful stream (Follow)
// and one failing call (Panic: INTERNAL), and returns the finished-call
// lines it logged.
func finishedCalls(t *testing.T, level slog.Level, accessLog bool) []callLine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs strings.Builder
	var mu sync.Mutex
	srv, err := New(Options{
		Service:       "test",
		HealthNames:   []string{"toolcrib.test.v1.TestService"},
		ListenAddr:    "127.0.0.1:0",
		Logger:        slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: level})),
		CheckInterval: 50 * time.Millisecond,
		AccessLog:     accessLog,
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
	if err := conn.Invoke(ctx, "/toolcrib.test.v1.TestService/Echo", new(emptypb.Empty), new(emptypb.Empty)); err != nil {
		t.Fatal(err)
	}
	cs, err := conn.NewStream(ctx, &slowDesc.Streams[0], "/toolcrib.test.v1.TestService/Follow")
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for cs.RecvMsg(new(emptypb.Empty)) == nil {
	}
	if err := conn.Invoke(ctx, "/toolcrib.test.v1.TestService/Panic", new(emptypb.Empty), new(emptypb.Empty)); err == nil {
		t.Fatal("Panic succeeded")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var out []callLine
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var c callLine
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if c.Msg == "finished call" {
			out = append(out, c)
		}
	}
	return out
}

// TestCallLogLevels: at info, a successful call (unary or stream) logs
// nothing and a failed one logs its line at its level; with the access log
// every call is logged at info and the failure at its own level; at debug
// the successful calls are there, at debug. The structured fields (method,
// code, kind) are kept in every case.
func TestCallLogLevels(t *testing.T) {
	type want struct{ level, method, code, kind string }
	cases := []struct {
		name      string
		level     slog.Level
		accessLog bool
		want      []want
	}{
		{"info", slog.LevelInfo, false, []want{{"ERROR", "Panic", "Internal", "unary"}}},
		{"info with the access log", slog.LevelInfo, true, []want{
			{"INFO", "Echo", "OK", "unary"}, {"INFO", "Follow", "OK", "server_stream"}, {"ERROR", "Panic", "Internal", "unary"}}},
		{"debug", slog.LevelDebug, false, []want{
			{"DEBUG", "Echo", "OK", "unary"}, {"DEBUG", "Follow", "OK", "server_stream"}, {"ERROR", "Panic", "Internal", "unary"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := finishedCalls(t, c.level, c.accessLog)
			if len(got) != len(c.want) {
				t.Fatalf("finished-call lines %+v, want %+v", got, c.want)
			}
			for i, w := range c.want {
				if g := got[i]; g.Level != w.level || g.Method != w.method || g.Code != w.code || g.Kind != w.kind {
					t.Fatalf("line %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// TestCallLevel pins the level of every code that has a rule of its own.
func TestCallLevel(t *testing.T) {
	for _, c := range []struct {
		code                codes.Code
		accessLog, stopping bool
		want                slog.Level
	}{
		{codes.OK, false, false, slog.LevelDebug},
		{codes.OK, true, false, slog.LevelInfo},
		{codes.Canceled, false, false, slog.LevelDebug},
		{codes.Canceled, true, false, slog.LevelInfo},
		{codes.Unavailable, false, false, slog.LevelWarn},
		{codes.Unavailable, false, true, slog.LevelInfo},
		{codes.NotFound, false, false, slog.LevelInfo},
		{codes.PermissionDenied, false, false, slog.LevelWarn},
		{codes.Internal, true, false, slog.LevelError},
	} {
		if got := slog.Level(callLevel(c.code, c.accessLog, c.stopping)); got != c.want {
			t.Errorf("%v (access log %v, stopping %v): %v, want %v", c.code, c.accessLog, c.stopping, got, c.want)
		}
	}
}
