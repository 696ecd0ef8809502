package mcpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Each request goes to the endpoint of its protocol, and the body reaches
// it whole, whatever was peeked: an initialize POST and a session's
// requests to the stateful endpoint; a 2026-07-28 request (session header
// or not), a POST that is no initialize, a body longer than the peek (a
// megabyte whose method field says initialize) and broken JSON to the
// stateless one.
func TestRoute(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 1<<20) + `"}}`
	cases := []struct {
		name, method, body, session, version, want string
	}{
		{"initialize", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "", "", "stateful"},
		{"initialize with white space", http.MethodPost, "\n  {\"method\" : \"initialize\", \"id\":1}", "", "", "stateful"},
		{"a session's request", http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "s1", "2025-11-25", "stateful"},
		{"standalone stream", http.MethodGet, "", "s1", "2025-11-25", "stateful"},
		{"end of session", http.MethodDelete, "", "s1", "2025-11-25", "stateful"},
		{"2026-07-28", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "", "2026-07-28", "stateless"},
		{"2026-07-28 naming a session", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "s1", "2026-07-28", "stateless"},
		{"old request without initialize", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "", "", "stateless"},
		{"initialize nested in params only", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"method":"initialize"}}`, "", "", "stateless"},
		{"a megabyte", http.MethodPost, big, "", "", "stateless"},
		{"broken JSON", http.MethodPost, `{"method":"initialize"`, "", "", "stateless"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got, body string
			endpoint := func(name string) http.Handler {
				return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
					got = name
					if r.Body != nil {
						b, _ := io.ReadAll(r.Body)
						body = string(b)
					}
				})
			}
			req := httptest.NewRequest(c.method, "/mcp", strings.NewReader(c.body))
			if c.session != "" {
				req.Header.Set(sessionHeader, c.session)
			}
			if c.version != "" {
				req.Header.Set(protocolHeader, c.version)
			}
			route(endpoint("stateless"), endpoint("stateful")).ServeHTTP(httptest.NewRecorder(), req)
			if got != c.want || body != c.body {
				t.Fatalf("went to %q with %d of %d bytes, want %q", got, len(body), len(c.body), c.want)
			}
		})
	}
}

// A session id names its holder only in the shape this gateway gives;
// anything else names none (the request stays on this replica, which
// answers 404), and nothing a client sends makes a replica dial an
// address that is not advertised.
func TestHolderOf(t *testing.T) {
	g := &Gateway{replicaID: newReplicaID(), peers: peers{byID: map[string]peer{}}}
	id := g.newSessionID()
	if holderOf(id) != g.replicaID || len(g.replicaID) != replicaIDLength {
		t.Fatalf("holderOf(%q) = %q, replica %q", id, holderOf(id), g.replicaID)
	}
	for _, s := range []string{"", "abc", ".x", strings.Repeat("A", replicaIDLength), "http://evil.example/.x", strings.Repeat("A", 1<<20) + ".x"} {
		if h := holderOf(s); h != "" {
			t.Fatalf("holderOf(%.40q) = %q", s, h)
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set(sessionHeader, strings.Repeat("B", replicaIDLength)+".x")
	if g.forward(rec, req) {
		t.Fatal("forwarded without Redis or an advertised holder")
	}
}
