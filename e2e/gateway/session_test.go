package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
	"github.com/toolcrib/toolcrib/services/gateway"
)

// sessionPost sends one JSON-RPC message to the gateway with token and, when set,
// the session header; it returns the status, the session header of the
// answer and the body.
func sessionPost(t *testing.T, url, token, session, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxFor(t), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

const initialize2025 = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`

// TestGatewaySessionBelongsToItsPrincipal: a 2025-11-25 client that
// initializes gets a session (Mcp-Session-Id); a request naming it with
// another principal's token (another tenant, another subject of the same
// tenant, the same subject name in another tenant) is refused 403 on
// POST, GET (the standalone stream) and DELETE, and the session still
// serves its owner, also with a fresh token of the same principal. A
// session id the gateway never gave is 404.
func TestGatewaySessionBelongsToItsPrincipal(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	code, sid, body := sessionPost(t, w.GatewayURL, alice, "", initialize2025)
	if code != http.StatusOK || sid == "" || !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize: %d session %q %s", code, sid, body)
	}
	if code, _, body := sessionPost(t, w.GatewayURL, alice, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if code, _, body := sessionPost(t, w.GatewayURL, alice, sid, list); code != http.StatusOK || !strings.Contains(body, "shipment_status") {
		t.Fatalf("alice on her session: %d %s", code, body)
	}
	others := map[string]string{
		"bob of tenant-b":   w.Token(t, "bob", gatewayworld.TenantB),
		"carol of tenant-a": w.Token(t, "carol", gatewayworld.TenantA),
		"alice of tenant-b": w.Token(t, "alice", gatewayworld.TenantB),
	}
	for who, tok := range others {
		if code, _, body := sessionPost(t, w.GatewayURL, tok, sid, list); code != http.StatusForbidden || strings.Contains(body, "shipment_status") {
			t.Fatalf("%s presenting alice's session: %d %s", who, code, body)
		}
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			req, _ := http.NewRequestWithContext(ctxFor(t), method, w.GatewayURL, nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Mcp-Session-Id", sid)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("%s: %s of alice's session: %d", who, method, resp.StatusCode)
			}
		}
	}
	// Her session survived the attempts, and a fresh token of hers is
	// still her.
	if code, _, body := sessionPost(t, w.GatewayURL, w.Token(t, "alice", gatewayworld.TenantA), sid, list); code != http.StatusOK || !strings.Contains(body, "shipment_status") {
		t.Fatalf("alice with a fresh token: %d %s", code, body)
	}
	if code, _, _ := sessionPost(t, w.GatewayURL, alice, "never-given-"+strings.Repeat("x", 20), list); code != http.StatusNotFound {
		t.Fatalf("an unknown session: %d", code)
	}
}

// TestGatewaySessionsPerPrincipalAreBounded: one principal holds at most
// --max-sessions-per-principal open sessions (here 2): the next initialize
// is refused 429 with Retry-After and opens nothing; another principal is
// not held back by it; ending one session (DELETE) makes room again.
func TestGatewaySessionsPerPrincipalAreBounded(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{Gateway: func(c *gateway.Config) { c.MaxSessionsPerPrincipal = 2 }})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	var sids []string
	for range 2 {
		code, sid, body := sessionPost(t, w.GatewayURL, alice, "", initialize2025)
		if code != http.StatusOK || sid == "" {
			t.Fatalf("initialize within the bound: %d %q %s", code, sid, body)
		}
		sids = append(sids, sid)
	}
	code, sid, body := sessionPost(t, w.GatewayURL, alice, "", initialize2025)
	if code != http.StatusTooManyRequests || sid != "" || !strings.Contains(body, "2 open MCP sessions") {
		t.Fatalf("a third session of alice: %d %q %s", code, sid, body)
	}
	// Her fresh token is the same principal: still refused.
	if code, _, _ := sessionPost(t, w.GatewayURL, w.Token(t, "alice", gatewayworld.TenantA), "", initialize2025); code != http.StatusTooManyRequests {
		t.Fatalf("alice with a fresh token: %d", code)
	}
	if code, sid, body := sessionPost(t, w.GatewayURL, w.Token(t, "carol", gatewayworld.TenantA), "", initialize2025); code != http.StatusOK || sid == "" {
		t.Fatalf("carol is held back by alice's sessions: %d %s", code, body)
	}
	req, _ := http.NewRequestWithContext(ctxFor(t), http.MethodDelete, w.GatewayURL, nil)
	req.Header.Set("Authorization", "Bearer "+alice)
	req.Header.Set("Mcp-Session-Id", sids[0])
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE of her session: %d", resp.StatusCode)
	}
	if code, sid, body := sessionPost(t, w.GatewayURL, alice, "", initialize2025); code != http.StatusOK || sid == "" {
		t.Fatalf("alice after ending one: %d %s", code, body)
	}
}
