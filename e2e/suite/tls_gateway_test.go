package suite

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/gateway"
)

// bearer adds a bearer token to every request.
type bearer struct {
	base  http.RoundTripper
	token string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// TestTLSGatewayListsAndCallsOverHTTPS puts a gateway in front of the
// TLS world: its MCP endpoint is https (no client certificate asked of MCP
// clients, who present bearer tokens), and a tools/call goes through it to
// admission, the lease service, the registry and discovery over mTLS, the
// gateway known to them by its SPIFFE certificate.
func TestTLSGatewayListsAndCallsOverHTTPS(t *testing.T) {
	w := leaseworld.StartWith(t, leaseworld.Options{CacheTTL: time.Minute, TLS: true})
	pki := w.St.Auth.TLS
	gurl := pgtest.NewDatabase(t, pgtest.Schema{Name: gateway.Schema, Sets: gateway.Migrations()})
	gcfg, err := gateway.ParseConfig([]string{"--cursor-key-file", filepath.Join(t.TempDir(), "cursor-key"), "--mcp-listen", "127.0.0.1:0"},
		func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	gcfg.AdmissionAddr, gcfg.LeaseAddr, gcfg.RegistryAddr, gcfg.DiscoveryAddr = w.AdmissionAddr, w.LeaseAddr, w.St.RegistryAddr, w.St.DiscoveryAddr
	gcfg.Egress.AllowLoopback = true
	urlc := make(chan string, 1)
	w.St.Auth.Start(t, func(ctx context.Context, listening func(string)) error {
		c := gcfg
		c.Common = w.St.Auth.CommonAs(t, "gateway", gurl, true, listening)
		c.Ready = func(u string) { urlc <- u }
		if err := c.Validate(); err != nil {
			return err
		}
		return gateway.Run(ctx, c)
	})
	url := <-urlc
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("MCP endpoint %q; want https", url)
	}

	alice := w.St.Auth.User(t, "alice", leaseworld.Tenant, "readers")
	hc := &http.Client{Transport: bearer{base: &http.Transport{TLSClientConfig: pki.ServerTrust()}, token: alice}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "tls-test", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect over https: %v", err)
	}
	defer cs.Close()
	var names []string
	servicetest.Eventually(t, 30*time.Second, "alice sees shipment_status through the gateway", func() bool {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = names[:0]
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		return strings.Contains(strings.Join(names, ","), "shipment_status")
	})
	var name string
	for _, n := range names {
		if strings.HasSuffix(n, "shipment_status") {
			name = n
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"shipment_id": "S-1"}})
	if err != nil {
		t.Fatalf("tools/call %s over https: %v", name, err)
	}
	// Admission decided (a receipt), the lease service issued a lease (an
	// execution receipt) and the upstream answered: leaseworld's fixture
	// answers without structured content, and the contract sets
	// allowed_fields, so the result policy withholds it
	// (RESULT_NOT_STRUCTURED), after the whole chain ran.
	if res.Meta["dev.toolcrib/receipt"] == nil || res.Meta["dev.toolcrib/execution-receipt"] == nil ||
		res.Meta["dev.toolcrib/reason"] != "RESULT_NOT_STRUCTURED" {
		t.Fatalf("tools/call %s over https and mTLS: %+v", name, res.Meta)
	}

	// Plain HTTP to the MCP port gets no MCP answer.
	resp, err := http.Post("http://"+strings.TrimPrefix(url, "https://"), "application/json", strings.NewReader(`{}`))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP to the MCP port: %s; want 400 from the TLS listener", resp.Status)
		}
	}
}
