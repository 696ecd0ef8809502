package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestHealthCommand: `toolcrib health` succeeds only while every address
// answers SERVING, and names the ones that do not.
func TestHealthCommand(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	// A port nothing listens on: taken, then released.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	addr := lis.Addr().String()
	call := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"--timeout", "2s", "health"}, args...), &out, &bytes.Buffer{})
		return out.String(), err
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	if out, err := call(addr); err != nil || !strings.Contains(out, addr+"\tSERVING") {
		t.Fatalf("serving: err %v, out %q", err, out)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if out, err := call(addr); err == nil || !strings.Contains(out, "NOT_SERVING") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("not serving: err %v, out %q", err, out)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	if out, err := call(addr, closedAddr); err == nil || !strings.Contains(err.Error(), closedAddr) || strings.Contains(err.Error(), addr+",") {
		t.Fatalf("one address down: err %v, out %q", err, out)
	}
	if _, err := call(); err == nil {
		t.Fatal("no address: want an error")
	}
}
