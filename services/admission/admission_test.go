package admission

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{"TOOLCRIB_VALIDITY_WINDOW": "2s"}
	cfg, err := ParseConfig([]string{"--registry-addr", "127.0.0.1:1"}, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ValidityWindow != 2*time.Second || cfg.RegistryAddr != "127.0.0.1:1" || cfg.ListenAddr != DefaultListenAddr {
		t.Fatalf("%+v", cfg)
	}
	_, err = ParseConfig([]string{"--validity-window", "0s", "--discovery-addr", "nope", "--max-argument-bytes", "99999999"}, func(string) (string, bool) { return "", false })
	for _, want := range []string{"--validity-window", "--discovery-addr", "--max-argument-bytes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want a problem with %s, got %v", want, err)
		}
	}
	if _, err := ParseConfig([]string{"-h"}, nil); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
}

// TestNotServingUntilBothStreamsCaughtUp runs the real service with
// Postgres and Redis up but the registry and discovery unreachable: health
// stays NOT_SERVING (the Watch check), and the service drains cleanly.
func TestNotServingUntilBothStreamsCaughtUp(t *testing.T) {
	auth := servicetest.NewAuth(t)
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: Schema, Sets: Migrations()})
	cfg, _ := ParseConfig(nil, func(string) (string, bool) { return "", false }) // defaults; Common replaced below
	cfg.Common = auth.Common(t, url, true, nil)
	cfg.RegistryAddr, cfg.DiscoveryAddr = "127.0.0.1:1", "127.0.0.1:1"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	addrc := make(chan string, 1)
	cfg.Listening = func(a string) { addrc <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	addr := <-addrc
	hc := healthpb.NewHealthClient(servicetest.Dial(t, addr, ""))
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			t.Fatal("SERVING while neither Watch stream ever caught up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
