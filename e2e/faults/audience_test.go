package faults_test

import (
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/faultreport"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// TestPrivateCatalogsStayWithTheirAudienceClass: one MCP server (one URL,
// one identity) lists different tools to two credentials and marks its
// lists `cacheScope: private` (2026-07-28). Two audience classes of two
// tenants read it, each with its own credential. Each class's generation
// holds exactly the catalog its credential was shown — including a tool
// both see under one name with different descriptions — and records the
// private cache scope; a tenant's principal reads its own class and is
// told the other's does not exist (DESIGN §6, I7). Every tool found in a
// class it was not served to counts as cross_audience_shared.
func TestPrivateCatalogsStayWithTheirAudienceClass(t *testing.T) {
	t.Parallel()
	e := startDiscovery(t, envOptions{})
	const server = "shared"
	classes := []struct {
		name, tenant, ref, token string
		fx                       *fixture.Server
	}{
		{"tenant-a.readers", "tenant-a", "env:FAULTS_UPSTREAM_TENANT_A", secrets["FAULTS_UPSTREAM_TENANT_A"], nil},
		{"tenant-b.readers", "tenant-b", "env:FAULTS_UPSTREAM_TENANT_B", secrets["FAULTS_UPSTREAM_TENANT_B"], nil},
	}
	private := &fixture.CacheHint{Scope: "private", TTLMs: 60_000}
	classes[0].fx = startFixture(t, fixture.Script{ProtocolVersion: fixture.Version20260728, Versioned: true, PageSize: 2, Cache: private,
		Tools: append(tools("billing", 3), fixture.NewTool("search", "Search tenant A's invoices."))})
	classes[1].fx = startFixture(t, fixture.Script{ProtocolVersion: fixture.Version20260728, Versioned: true, PageSize: 2, Cache: private,
		Tools: append(tools("payroll", 2), fixture.NewTool("search", "Search tenant B's payslips."))})

	// One endpoint: the credential decides which catalog is listed.
	handlers := map[string]http.Handler{}
	for _, c := range classes {
		handlers["Bearer "+c.token] = c.fx.HTTPHandler(true)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		h, ok := handlers[r.Header.Get("Authorization")]
		if !ok {
			http.Error(w, "unknown credential", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	e.register(server, overHTTP("http://"+ln.Addr().String()+"/mcp"), serverProvided, "")
	for _, c := range classes {
		e.bind(c.name, c.tenant, server, c.ref)
	}

	scans := make([]string, len(classes))
	for i, c := range classes {
		scans[i] = e.scan(server, c.name)
	}
	snaps := make([]*catalogv1.Snapshot, len(classes))
	for i, c := range classes {
		r := e.wait(scans[i], nil)
		want(t, r, eligible, noReason)
		agrees(t, r, judge(t, scanLogs(c.fx.Log().Events())[0], serverProvided))
		snaps[i] = e.checkWhole(t, server, c.name, c.fx.Log().Events())
		if snaps[i].GetCacheScope() != "private" || snaps[i].GetTenant() != c.tenant || snaps[i].GetAudienceClass() != c.name {
			t.Fatalf("%s: cache scope %q, tenant %q, class %q", c.name, snaps[i].GetCacheScope(), snaps[i].GetTenant(), snaps[i].GetAudienceClass())
		}
	}

	// Count every tool of a class that only the other class was served.
	served := make([]map[string]bool, len(classes))
	for i, c := range classes {
		served[i] = map[string]bool{}
		for _, tool := range c.fx.State().Tools {
			served[i][tool.Name()+"="+digestOf(t, tool)] = true
		}
	}
	var shared int64
	for i := range classes {
		for _, tool := range snaps[i].GetTools() {
			if !served[i][tool.GetName()+"="+tool.GetDescriptorDigest()] {
				shared++
				t.Errorf("%s holds %s (%s), which was served to another class only", classes[i].name, tool.GetName(), tool.GetDescriptorDigest())
			}
		}
	}

	// Through the API, as each tenant's principal.
	for i, c := range classes {
		cl := discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, e.addr, e.auth.User(t, "reader", c.tenant, "readers")))
		own, err := cl.GetActiveSnapshot(ctxT(t), &discoveryv1.GetActiveSnapshotRequest{ServerId: server, AudienceClass: c.name})
		if err != nil {
			t.Fatalf("%s reading its own class: %v", c.tenant, err)
		}
		if names(own.GetSnapshot().GetTools()) != names(snaps[i].GetTools()) {
			t.Fatalf("%s reads %s, the class holds %s", c.tenant, names(own.GetSnapshot().GetTools()), names(snaps[i].GetTools()))
		}
		other := classes[1-i]
		got, err := cl.GetActiveSnapshot(ctxT(t), &discoveryv1.GetActiveSnapshotRequest{ServerId: server, AudienceClass: other.name})
		if status.Code(err) != codes.NotFound {
			shared += int64(len(got.GetSnapshot().GetTools()))
			t.Errorf("%s reading %s: %v (%d tools), want NotFound", c.tenant, other.name, err, len(got.GetSnapshot().GetTools()))
		}
	}
	faultreport.Add(t, faultreport.CrossAudienceShared, shared)
}
