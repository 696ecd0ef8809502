package admission

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{"TOOLCRIB_VALIDITY_WINDOW": "2s"}
	cfg, err := ParseConfig([]string{"--registry-addr", "127.0.0.1:1"}, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ValidityWindow != 2*time.Second || cfg.RegistryAddr != "127.0.0.1:1" || cfg.ListenAddr != DefaultListenAddr ||
		cfg.ConfirmerGroup != config.DefaultConfirmerGroup {
		t.Fatalf("%+v", cfg)
	}
	if cfg, err := ParseConfig([]string{"--confirmer-group", "gateways"}, func(string) (string, bool) { return "", false }); err != nil || cfg.ConfirmerGroup != "gateways" {
		t.Fatalf("--confirmer-group: %q %v", cfg.ConfirmerGroup, err)
	}
	if cfg.ReceiptKeyFile != "" || cfg.ReceiptKeyRotateEvery != 24*time.Hour || cfg.ReceiptKeyCheckInterval != 30*time.Second {
		t.Fatalf("receipt key defaults: %q %v %v", cfg.ReceiptKeyFile, cfg.ReceiptKeyRotateEvery, cfg.ReceiptKeyCheckInterval)
	}
	_, err = ParseConfig([]string{"--validity-window", "0s", "--discovery-addr", "nope", "--max-argument-bytes", "99999999",
		"--receipt-key-rotate-every", "10s", "--receipt-key-check-interval", "0s"}, func(string) (string, bool) { return "", false })
	for _, want := range []string{"--validity-window", "--discovery-addr", "--max-argument-bytes", "--receipt-key-rotate-every", "--receipt-key-check-interval"} {
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

// syncBuffer is a log sink the service writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMetricsAndQuietCheck runs the real service (upstreams unreachable, so
// never fresh), answers Checks through the API with a real token and scrapes
// /metrics: decisions by reason, cache answers by level, each stream's
// heartbeat age (+Inf: never caught up) and the receipts pending. A Check
// answered OK leaves no access-log line at info.
func TestMetricsAndQuietCheck(t *testing.T) {
	auth := servicetest.NewAuth(t)
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: Schema, Sets: Migrations()})
	cfg, _ := ParseConfig(nil, func(string) (string, bool) { return "", false })
	cfg.Common = auth.Common(t, url, true, nil)
	cfg.RegistryAddr, cfg.DiscoveryAddr = "127.0.0.1:1", "127.0.0.1:1"
	logs := &syncBuffer{}
	cfg.LogOutput, cfg.LogLevel = logs, slog.LevelInfo
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MetricsAddr = lis.Addr().String()
	_ = lis.Close()
	addrc := make(chan string, 1)
	cfg.Listening = func(a string) { addrc <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() { cancel(); <-done })
	addr := <-addrc

	c := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, addr, auth.User(t, "alice", "demo-a")))
	req := &admissionv1.CheckRequest{ToolId: "logistics.shipment_status", Generation: 7,
		DescriptorDigest: "sha256:" + strings.Repeat("a", 64), PolicyEpoch: 5, Arguments: []byte(`{}`),
		Mode: admissionv1.Mode_MODE_AUTONOMOUS}
	for range 3 {
		resp, err := c.Check(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetReason() != catalogv1.DecisionReason_DECISION_REASON_STALE_POLICY {
			t.Fatalf("reason %v, want STALE_POLICY from a replica that never caught up", resp.GetReason())
		}
	}
	req.ToolId = ""
	if resp, err := c.Check(context.Background(), req); err != nil || resp.GetReason() != catalogv1.DecisionReason_DECISION_REASON_INVALID_INPUT {
		t.Fatalf("%v %v", resp, err)
	}

	resp, err := http.Get("http://" + cfg.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{
		`toolcrib_admission_decisions_total{reason="STALE_POLICY"} 3`,
		`toolcrib_admission_decisions_total{reason="INVALID_INPUT"} 1`,
		`toolcrib_admission_decisions_total{reason="ALLOW"} 0`,
		`toolcrib_admission_decision_cache_total{level="miss"} 4`,
		`toolcrib_admission_decision_cache_total{level="l1"} 0`,
		`toolcrib_admission_decision_cache_total{level="l2"} 0`,
		`toolcrib_admission_heartbeat_age_seconds{stream="registry"} +Inf`,
		`toolcrib_admission_heartbeat_age_seconds{stream="discovery"} +Inf`,
		`toolcrib_admission_receipts_pending `,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Check",grpc_service="toolcrib.admission.v1.AdmissionService",grpc_type="unary"} 4`,
	} {
		if !strings.Contains(string(body), series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
	if strings.Contains(logs.String(), "grpc.method=Check") {
		t.Errorf("a Check answered OK was logged at info:\n%s", logs.String())
	}
	// A failed Check is still access-logged, with the handler's time.
	anon := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, addr, ""))
	if _, err := anon.Check(context.Background(), req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a token: %v", err)
	}
	failed := regexp.MustCompile(`msg="finished call" .*grpc.handler_time_ms=[0-9.]+ .*grpc.method=Check .*grpc.code=Unauthenticated`)
	for deadline := time.Now().Add(2 * time.Second); !failed.MatchString(logs.String()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the failed Check was not logged:\n%s", logs.String())
		}
	}
}
