package mcpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A JSON-RPC batch, of one element or of 10,001, is answered with one
// bounded JSON-RPC error and never reaches MCP; a single request passes
// with its body whole.
func TestRefuseBatches(t *testing.T) {
	var reached []string
	h := refuseBatches(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reached = append(reached, string(b))
	}))
	one := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	huge := "[" + strings.TrimSuffix(strings.Repeat(one+",", 10001), ",") + "]"
	for _, body := range []string{"[" + one + "]", " \r\n\t" + huge} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body)))
		var e struct {
			ID    any `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if rec.Code != http.StatusBadRequest || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Code != -32600 ||
			e.ID != nil || !strings.Contains(e.Error.Message, "batches are not supported") || rec.Body.Len() > 200 {
			t.Fatalf("batch of %d bytes: %d %s", len(body), rec.Code, rec.Body.String())
		}
	}
	if len(reached) != 0 {
		t.Fatalf("a batch reached MCP: %d", len(reached))
	}
	body := "\n " + one
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body)))
	if len(reached) != 1 || reached[0] != body {
		t.Fatalf("a single request reached MCP as %q", reached)
	}
}

// An Origin not allowed is refused 403; an allowed one (any case) and a
// request without Origin pass; with none allowed every Origin is refused.
func TestCheckOrigin(t *testing.T) {
	served := 0
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ })
	for _, c := range []struct {
		allowed []string
		origin  []string
		want    int
	}{
		{nil, nil, http.StatusOK},
		{nil, []string{"http://evil.example"}, http.StatusForbidden},
		{[]string{"https://app.example"}, []string{"http://evil.example"}, http.StatusForbidden},
		{[]string{"https://app.example"}, []string{"https://app.example"}, http.StatusOK},
		{[]string{"https://app.example"}, []string{"HTTPS://App.Example"}, http.StatusOK},
		{[]string{"https://app.example"}, []string{"https://app.example:8443"}, http.StatusForbidden},
		{[]string{"https://app.example"}, []string{"https://app.example", "http://evil.example"}, http.StatusForbidden},
		{[]string{"https://app.example"}, []string{"null"}, http.StatusForbidden},
		// Loopback origins pass (a DNS rebinding page never has one).
		{nil, []string{"http://localhost:7105"}, http.StatusOK},
		{nil, []string{"http://127.0.0.1:43409"}, http.StatusOK},
		{nil, []string{"https://[::1]"}, http.StatusOK},
		{nil, []string{"http://localhost.evil.example"}, http.StatusForbidden},
		{nil, []string{"http://127.0.0.1.nip.example"}, http.StatusForbidden},
		{nil, []string{"file://localhost"}, http.StatusForbidden},
		{nil, []string{"http://user@localhost"}, http.StatusForbidden},
	} {
		before := served
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		for _, o := range c.origin {
			r.Header.Add("Origin", o)
		}
		rec := httptest.NewRecorder()
		CheckOrigin(c.allowed, ok).ServeHTTP(rec, r)
		if rec.Code != c.want || (served > before) != (c.want == http.StatusOK) {
			t.Errorf("allowed %q, Origin %q: %d (served %v), want %d", c.allowed, c.origin, rec.Code, served > before, c.want)
		}
	}
}

// resultType: "complete" or "input_required" at 2026-07-28, and removed
// (also when an upstream's result carried it) for older versions.
func TestTypedResult(t *testing.T) {
	var relayed mcp.CallToolResult // an upstream's 2026-07-28 answer, as the client SDK decodes it
	if err := json.Unmarshal([]byte(`{"content":[{"type":"text","text":"ok"}],"resultType":"complete"}`), &relayed); err != nil {
		t.Fatal(err)
	}
	ask := &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "sure?"}}}
	for _, c := range []struct {
		res  mcp.Result
		rt   string
		want string
	}{
		{typedResult{Result: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, resultType: resultTypeComplete}, "complete", "ok"},
		{typedResult{Result: &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "x:y", Text: "ok"}}}, resultType: resultTypeComplete}, "complete", "ok"},
		{typedResult{Result: ask, resultType: resultTypeInputRequired}, "input_required", "sure?"},
		{typedResult{Result: &relayed}, "", "ok"},
		{withResultType(nil, &relayed), "", "ok"}, // no session: not 2026-07-28
	} {
		b, err := json.Marshal(c.res)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		rt, has := m["resultType"]
		if c.rt == "" && has || c.rt != "" && rt != c.rt || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: resultType %v, want %q", b, rt, c.rt)
		}
	}
}

// The priming event of a POST SSE stream gets the retry field; other
// events, JSON answers and GET streams are written unchanged, and flushing
// still reaches the connection.
func TestSSERetryOnPrimingEvent(t *testing.T) {
	prime := "event: prime\nid: 0_1\ndata: \n\n"
	msg := "event: message\nid: 0_2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
	for _, c := range []struct {
		name, method, ctype string
		writes              []string
		want                string
	}{
		{"post sse", http.MethodPost, "text/event-stream", []string{prime, msg}, "event: prime\nretry: 2000\nid: 0_1\ndata: \n\n" + msg},
		{"post sse without priming", http.MethodPost, "text/event-stream", []string{msg}, msg},
		{"priming not first", http.MethodPost, "text/event-stream", []string{msg, prime}, msg + prime},
		{"post json", http.MethodPost, "application/json", []string{prime}, prime},
		{"get stream", http.MethodGet, "text/event-stream", []string{prime}, prime},
	} {
		h := withSSERetry(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", c.ctype)
			for _, s := range c.writes {
				if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
					t.Errorf("%s: wrote %d of %d: %v", c.name, n, len(s), err)
				}
				if err := http.NewResponseController(w).Flush(); err != nil {
					t.Errorf("%s: flush: %v", c.name, err)
				}
			}
		}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, "/mcp", nil))
		if got := rec.Body.String(); got != c.want {
			t.Errorf("%s:\n%q\nwant\n%q", c.name, got, c.want)
		}
		if !rec.Flushed {
			t.Errorf("%s: not flushed", c.name)
		}
	}
}
