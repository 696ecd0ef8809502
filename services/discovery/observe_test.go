package discovery_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// syncBuffer is a log sink safe for the service's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// What an operator sees of scans: a log line per run end (server, class,
// state, reason, pages, tools, duration) and per pointer move, the caller in
// the access log, and the /metrics series of runs, durations, pages, tools,
// pointer moves and the queue, scraped from the real service.
func TestScansAreLoggedAndCounted(t *testing.T) {
	logs := &syncBuffer{}
	metricsAddr := freeAddr(t)
	e := start(t, func(c *discovery.Config) {
		c.LogOutput, c.LogLevel = logs, slog.LevelInfo
		c.AccessLog = true // successful calls reach the log at info only with it
		c.MetricsAddr = metricsAddr
		c.MaxAttempts = 1
	})
	cat := discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("inv", 3)...)
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	e.register("down", "http://"+freeAddr(t)+"/mcp", registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")

	want(t, e.scanAndWait("inventory", class), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	want(t, e.scanAndWait("inventory", class), proven, discoveryv1.RunReason_RUN_REASON_UNCHANGED)
	want(t, e.wait(e.scan("down", class).GetScanId(), discovery.Terminal), incomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR)

	// The log lines are written after the commit the run's record is read
	// from; give the last one a moment.
	lineFor := func(pattern string) string {
		t.Helper()
		re := regexp.MustCompile(pattern)
		deadline := time.Now().Add(5 * time.Second)
		for {
			if m := re.FindString(logs.String()); m != "" {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("no log line matches %s:\n%s", pattern, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	lineFor(`msg="run ended" service=discovery server=inventory audience_class=tenant-a.readers state=ELIGIBLE reason=NONE pages=2 tools=3 duration=[0-9.]+(ms|s|µs) generation=1 run=[0-9a-f-]{36}`)
	lineFor(`msg="run ended" service=discovery server=inventory audience_class=tenant-a.readers state=SNAPSHOT_PROVEN reason=UNCHANGED pages=2 tools=3 duration=\S+ generation=1 `)
	lineFor(`msg="run ended" service=discovery server=down audience_class=tenant-a.readers state=INCOMPLETE reason=TRANSPORT_ERROR pages=0 tools=0 duration=\S+ generation=0 `)
	lineFor(`msg="pointer moved" service=discovery server=inventory audience_class=tenant-a.readers move=ACTIVATE generation=1 previous_generation=0 pointer_state=POINTER_STATE_ACTIVE revision=1 `)
	lineFor(`msg="pointer moved" service=discovery server=inventory audience_class=tenant-a.readers move=REFRESH generation=1 previous_generation=1 pointer_state=POINTER_STATE_ACTIVE revision=2 `)
	// The access log (--access-log) names the admin that triggered the scans.
	lineFor(`msg="finished call" service=discovery caller.subject=test-admin caller.tenant=toolcrib-platform .*grpc.method=TriggerScan `)
	// Migrations are logged: the test database has discovery's own tables
	// already, so River's are the ones applied at start-up here.
	lineFor(`msg="migration applied" service=discovery schema=discovery set=river migration="001_`)
	if strings.Contains(logs.String(), "connection refused") {
		t.Errorf("a run's detail reached the log:\n%s", logs.String())
	}

	scrape := func() string {
		t.Helper()
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("scrape: %d %v", resp.StatusCode, err)
		}
		return string(body)
	}
	// River records a job's end a moment after the run's: wait until no job
	// is running any more.
	body := scrape()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(body, `toolcrib_discovery_queue_jobs{state="running"} 0`+"\n") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		body = scrape()
	}
	for _, series := range []string{
		`toolcrib_discovery_runs_total{reason="NONE",state="ELIGIBLE"} 1`,
		`toolcrib_discovery_runs_total{reason="UNCHANGED",state="SNAPSHOT_PROVEN"} 1`,
		`toolcrib_discovery_runs_total{reason="TRANSPORT_ERROR",state="INCOMPLETE"} 1`,
		`toolcrib_discovery_scan_duration_seconds_count{state="ELIGIBLE"} 1`,
		`toolcrib_discovery_scan_duration_seconds_count{state="INCOMPLETE"} 1`,
		`toolcrib_discovery_scan_pages_count 3`,
		`toolcrib_discovery_scan_pages_sum 4`,
		`toolcrib_discovery_scan_tools_sum 6`,
		`toolcrib_discovery_scan_tools_bucket{le="4"} 3`,
		`toolcrib_discovery_pointer_moves_total{move="ACTIVATE"} 1`,
		`toolcrib_discovery_pointer_moves_total{move="REFRESH"} 1`,
		// Every scan ended (the failed one is not retried: one attempt).
		`toolcrib_discovery_queue_jobs{state="available"} 0`,
		`toolcrib_discovery_queue_jobs{state="retryable"} 0`,
		`toolcrib_discovery_queue_jobs{state="running"} 0`,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="TriggerScan",grpc_service="toolcrib.discovery.v1.DiscoveryService",grpc_type="unary"} 3`,
	} {
		if !strings.Contains(body, series+"\n") {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
