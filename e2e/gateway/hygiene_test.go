package gateway_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
	"github.com/toolcrib/toolcrib/services/gateway"
)

// post sends one raw POST to the gateway and returns the status and the
// JSON-RPC message answered (the data of the first SSE event, or the body).
func post(t *testing.T, url, token, version, origin, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	if version >= "2026-07-28" && strings.HasPrefix(body, "{") {
		// The standard headers the version requires of a request.
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Mcp-Method", m.Method)
		req.Header.Set("Mcp-Name", m.Params.Name)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return resp.StatusCode, d
		}
	}
	return resp.StatusCode, ""
}

// callBody is a tools/call of shipment_status at version: a 2026-07-28
// request names its version, client and capabilities in _meta (no
// initialize); an older one relies on the stateless endpoint's defaults.
func callBody(version string) string { return callToolBody(version, "shipment_status") }

func callToolBody(version, tool string) string {
	meta := ""
	if version >= "2026-07-28" {
		meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version + `","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	}
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"shipment_id":"S-1"}` + meta + `}}`
}

// TestGatewayProtocolHygiene (issue 23 point 6), through the real
// services: resultType on a 2026-07-28 tools/call result and not on a
// 2025-11-25 one (the first call is answered by the gateway's own
// pipeline, the second after a listing by the tool the SDK registered);
// a JSON-RPC batch, of one or of 10,001 requests, answered with one
// JSON-RPC error and not run; an Origin not in --allowed-origins refused
// 403, an allowed one and none served.
func TestGatewayProtocolHygiene(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{Gateway: func(c *gateway.Config) { c.AllowedOrigins = "https://app.example" }})
	tok := w.Token(t, "alice", gatewayworld.TenantA)

	t.Run("resultType", func(t *testing.T) {
		called := 0
		for _, c := range []struct {
			version string
			want    any
		}{
			{"2026-07-28", "complete"}, {"2025-11-25", nil}, {"2026-07-28", "complete"}, {"2025-06-18", nil},
		} {
			if c.version == "2026-07-28" && called > 0 {
				// Listed: the SDK's registered tool answers now.
				if _, err := gatewayworld.Connect(t, w.GatewayURL, tok, nil).ListTools(ctxFor(t), nil); err != nil {
					t.Fatal(err)
				}
			}
			called++
			code, msg := post(t, w.GatewayURL, tok, c.version, "", callBody(c.version))
			var m struct {
				Result map[string]any `json:"result"`
			}
			if code != http.StatusOK || json.Unmarshal([]byte(msg), &m) != nil || m.Result == nil || m.Result["isError"] == true {
				t.Fatalf("%s: %d %s", c.version, code, msg)
			}
			if m.Result["resultType"] != c.want {
				t.Errorf("%s: resultType %v, want %v (%s)", c.version, m.Result["resultType"], c.want, msg)
			}
		}
	})

	t.Run("resultType of a denial", func(t *testing.T) {
		// The gateway's own answer (a tool not visible is denied by its
		// pipeline, not by a handler the SDK runs).
		for version, want := range map[string]any{"2026-07-28": "complete", "2025-11-25": nil} {
			code, msg := post(t, w.GatewayURL, tok, version, "", callToolBody(version, "archive_export"))
			var m struct {
				Result map[string]any `json:"result"`
			}
			if code != http.StatusOK || json.Unmarshal([]byte(msg), &m) != nil || m.Result["isError"] != true {
				t.Fatalf("%s: %d %s", version, code, msg)
			}
			if m.Result["resultType"] != want {
				t.Errorf("%s: resultType %v, want %v (%.300s)", version, m.Result["resultType"], want, msg)
			}
		}
	})

	t.Run("batch", func(t *testing.T) {
		before := len(callsOf(w, "shipment_status"))
		one := callBody("2025-03-26")
		for _, n := range []int{1, 10001} {
			body := "[" + strings.TrimSuffix(strings.Repeat(one+",", n), ",") + "]"
			code, msg := post(t, w.GatewayURL, tok, "2025-03-26", "", body)
			var e struct {
				ID    any `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if code != http.StatusBadRequest || json.Unmarshal([]byte(msg), &e) != nil || e.Error.Code != -32600 ||
				e.ID != nil || !strings.Contains(e.Error.Message, "batches are not supported") || len(msg) > 200 {
				t.Fatalf("batch of %d: %d %.300s", n, code, msg)
			}
		}
		if ran := len(callsOf(w, "shipment_status")) - before; ran != 0 {
			t.Fatalf("the upstream ran %d calls of a batch", ran)
		}
	})

	t.Run("origin", func(t *testing.T) {
		for _, c := range []struct {
			origin string
			want   int
		}{
			{"http://evil.example", http.StatusForbidden}, {"https://app.example", http.StatusOK}, {"", http.StatusOK},
		} {
			code, msg := post(t, w.GatewayURL, tok, "2025-11-25", c.origin, callBody("2025-11-25"))
			if code != c.want || c.want == http.StatusOK && !strings.Contains(msg, `"result"`) {
				t.Errorf("Origin %q: %d %.200s, want %d", c.origin, code, msg, c.want)
			}
		}
	})
}
