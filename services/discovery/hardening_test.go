package discovery_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/services/discovery"
)

// acceptCounter is a loopback TCP listener that counts the connections it
// accepts (and closes them): the proof that nothing connected.
type acceptCounter struct {
	ln net.Listener
	n  atomic.Int32
}

func countAccepts(t *testing.T) *acceptCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &acceptCounter{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a.n.Add(1)
			c.Close()
		}
	}()
	return a
}

func (a *acceptCounter) port() string {
	_, p, _ := net.SplitHostPort(a.ln.Addr().String())
	return p
}

func wantDetail(t *testing.T, r *discoveryv1.Run, sub string) {
	t.Helper()
	if !strings.Contains(r.GetDetail(), sub) {
		t.Fatalf("run detail %q does not contain %q", r.GetDetail(), sub)
	}
}

// Issue 8.4 at dial time: with loopback forbidden (the default), servers
// whose URLs name loopback (as an address, as localhost) end INCOMPLETE
// EGRESS_REFUSED naming the rule, are not retried, and the listener never
// accepts a connection. The registry refuses these URLs too; this checks
// discovery does not rely on that.
func TestEgressPolicyRefusesBeforeAnyConnection(t *testing.T) {
	e := start(t, func(c *discovery.Config) { c.Egress.AllowLoopback = false })
	l := countAccepts(t)
	for id, url := range map[string]string{
		"literal":   "http://127.0.0.1:" + l.port() + "/mcp",
		"localhost": "http://localhost:" + l.port() + "/mcp",
		"ipv6":      "http://[::1]:" + l.port() + "/mcp",
		"imds":      "https://169.254.169.254/latest/meta-data/",
	} {
		e.register(id, url, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
		tk := e.scan(id, class)
		r := e.wait(tk.GetScanId(), discovery.Terminal)
		want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_EGRESS_REFUSED)
		time.Sleep(300 * time.Millisecond) // three retry bases
		runs, err := e.admin.ListRuns(ctxT(t), &discoveryv1.ListRunsRequest{ScanId: tk.GetScanId()})
		if err != nil || len(runs.GetRuns()) != 1 {
			t.Fatalf("%s: an egress refusal was retried: %d runs, %v", id, len(runs.GetRuns()), err)
		}
		rule := "rule loopback"
		if id == "imds" {
			rule = "rule metadata"
		}
		wantDetail(t, r, rule)
	}
	if n := l.n.Load(); n != 0 {
		t.Fatalf("the loopback listener accepted %d connections", n)
	}
}

// Issue 8.5 at scan time: references outside the secret directories (the
// dev admin token; a symlink in the directory that leaves it) and env:
// variables without the prefix end CREDENTIAL_UNAVAILABLE naming the rule,
// without opening the file and without connecting. The admin token is a
// FIFO with no writer: opening it would block the scan past its timeout.
func TestSecretReferencesAreConfinedAtScanTime(t *testing.T) {
	base := t.TempDir()
	secrets, dev := filepath.Join(base, "secrets"), filepath.Join(base, ".toolcrib", "dev")
	for _, d := range []string{secrets, dev} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	adminToken := filepath.Join(dev, "admin-token")
	if err := syscall.Mkfifo(adminToken, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(adminToken, filepath.Join(secrets, "escape")); err != nil {
		t.Fatal(err)
	}
	e := start(t, func(c *discovery.Config) {
		c.Secrets.Dirs = secrets
		c.ScanTimeout, c.RescueAfter, c.MaxAttempts = 10*time.Second, 20*time.Second, 1
	})
	l := countAccepts(t)
	e.register("inventory", "http://127.0.0.1:"+l.port()+"/mcp", registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	for i, c := range []struct{ ref, rule string }{
		{"file:" + adminToken, "rule outside-secret-dirs"},
		{"file:" + filepath.Join(secrets, "escape"), "rule outside-secret-dirs"},
		{"env:TOOLCRIB_POSTGRES_URL", "rule env-prefix"},
	} {
		cls := "tenant-a.c" + string(rune('a'+i))
		e.bind(cls, "inventory", c.ref)
		start := time.Now()
		r := e.wait(e.scan("inventory", cls).GetScanId(), discovery.Terminal)
		want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_CREDENTIAL_UNAVAILABLE)
		wantDetail(t, r, c.rule)
		if strings.Contains(r.GetDetail(), base) {
			t.Fatalf("the run detail shows the reference: %q", r.GetDetail())
		}
		if d := time.Since(start); d > 8*time.Second {
			t.Fatalf("%s took %v: the FIFO was opened", c.ref, d)
		}
	}
	if n := l.n.Load(); n != 0 {
		t.Fatalf("the server was connected to %d times", n)
	}
}

// statusText is every text a status carries.
func statusText(err error) string {
	st := status.Convert(err)
	var b strings.Builder
	b.WriteString(st.Message())
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			for k, v := range d.GetMetadata() {
				b.WriteString(k + v)
			}
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				b.WriteString(v.GetField() + v.GetDescription())
			}
		}
	}
	return b.String()
}

// Issue 8.6: GetRun with a 3.9 MB id that is not a UUID is INVALID_ARGUMENT
// with a bounded answer, and the service's log (access log included) holds
// at most a bounded prefix of it; a well-formed unknown run id is NOT_FOUND.
// The other id fields of the API are bounded the same way.
func TestHugeIDsAreRefusedAndNotEchoed(t *testing.T) {
	logs := &syncBuffer{}
	e := start(t, func(c *discovery.Config) { c.LogOutput = logs })
	ctx := ctxT(t)
	huge := strings.Repeat("A", 3_900_000)
	svc := e.client(e.auth.Service(t)) // ReportIncident is for services only
	_, err := e.admin.GetRun(ctx, &discoveryv1.GetRunRequest{RunId: huge})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("GetRun(huge): %v", status.Convert(err).Code())
	}
	if n := len(statusText(err)); n > 2*apierror.MaxMessage {
		t.Fatalf("GetRun(huge) answered %d bytes", n)
	}
	_, err = e.admin.GetRun(ctx, &discoveryv1.GetRunRequest{RunId: "0b7a4c5e-9d7f-4a55-8f7e-1c2d3e4f5a6b"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("GetRun(unknown uuid): %v", err)
	}
	for name, call := range map[string]func() error{
		"ListRuns.scan_id": func() error {
			_, err := e.admin.ListRuns(ctx, &discoveryv1.ListRunsRequest{ScanId: huge})
			return err
		},
		"ListRuns.page_token": func() error {
			_, err := e.admin.ListRuns(ctx, &discoveryv1.ListRunsRequest{PageToken: huge})
			return err
		},
		"TriggerScan.server_id": func() error {
			_, err := e.admin.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: huge})
			return err
		},
		"GetSnapshot.audience_class": func() error {
			_, err := e.admin.GetSnapshot(ctx, &discoveryv1.GetSnapshotRequest{ServerId: "a", AudienceClass: huge, Generation: 1})
			return err
		},
		"BindGeneration.run_id": func() error {
			_, err := e.admin.BindGeneration(ctx, &discoveryv1.BindGenerationRequest{ServerId: "a", AudienceClass: class, Generation: 1, RunId: huge})
			return err
		},
		"SetStaticToolList.tools": func() error {
			_, err := e.admin.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: "a", AudienceClass: class,
				Tools: []*discoveryv1.StaticTool{{Name: huge}}})
			return err
		},
		"SetStaticToolList.tools[0].name": func() error {
			_, err := e.admin.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: "a", AudienceClass: class,
				Tools: []*discoveryv1.StaticTool{{Name: huge[:1_500_000]}}})
			return err
		},
		"SetStaticToolList.reason": func() error {
			_, err := e.admin.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: "a", AudienceClass: class, Reason: huge})
			return err
		},
		"GetStaticToolList.server_id": func() error {
			_, err := e.admin.GetStaticToolList(ctx, &discoveryv1.GetStaticToolListRequest{ServerId: huge, AudienceClass: class})
			return err
		},
		"GetRunComparison.run_id": func() error {
			_, err := e.admin.GetRunComparison(ctx, &discoveryv1.GetRunComparisonRequest{RunId: huge})
			return err
		},
		"ReportIncident.event_id": func() error {
			_, err := svc.ReportIncident(ctx, &discoveryv1.ReportIncidentRequest{EventId: huge, ServerId: "a", AudienceClass: class,
				Kind: discoveryv1.IncidentKind_INCIDENT_KIND_LEASE_AFTER_REVOKE})
			return err
		},
		"ReportIncident.detail": func() error {
			_, err := svc.ReportIncident(ctx, &discoveryv1.ReportIncidentRequest{EventId: "lease-after-revoke:x", ServerId: "a", AudienceClass: class,
				Kind: discoveryv1.IncidentKind_INCIDENT_KIND_LEASE_AFTER_REVOKE, Detail: huge})
			return err
		},
		"ListGuardActions.page_token": func() error {
			_, err := e.admin.ListGuardActions(ctx, &discoveryv1.ListGuardActionsRequest{PageToken: huge})
			return err
		},
		"ResumeGuard.reason": func() error {
			_, err := e.admin.ResumeGuard(ctx, &discoveryv1.ResumeGuardRequest{ServerId: "a", AudienceClass: class, Reason: huge})
			return err
		},
		"Rollback.reason": func() error {
			_, err := e.admin.Rollback(ctx, &discoveryv1.RollbackRequest{ServerId: "a", AudienceClass: class, ExpectedGeneration: 2, Reason: huge})
			return err
		},
	} {
		err := call()
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, status.Code(err))
		}
		if n := len(statusText(err)); n > 2*apierror.MaxMessage {
			t.Errorf("%s answered %d bytes", name, n)
		}
	}
	time.Sleep(100 * time.Millisecond) // the access log line is written after the answer
	if n := len(logs.String()); n > 64<<10 {
		t.Fatalf("the log holds %d bytes after these calls", n)
	}
	if strings.Contains(logs.String(), strings.Repeat("A", apierror.MaxEcho+1)) {
		t.Fatal("the log holds more than a bounded prefix of the id")
	}
}
