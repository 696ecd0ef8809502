package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/revision"
)

// start runs the example server on free loopback ports until the test
// ends and returns its MCP and admin URLs.
func start(t *testing.T, stateful bool) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan [2]string, 1)
	done := make(chan error, 1)
	cfg := Config{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", Stateful: stateful, PageSize: 2,
		CursorKey: []byte("example server test key, 16+ bytes")}
	go func() {
		done <- Serve(ctx, cfg, slog.New(slog.DiscardHandler), func(m, a string) { urls <- [2]string{m, a} })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	select {
	case u := <-urls:
		return u[0], u[1]
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the server never listened")
	}
	return "", ""
}

func connect(t *testing.T, url, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type listing struct {
	revisions []string
	tools     map[string]string // name -> description
	cursors   []string
}

func walk(t *testing.T, cs *mcp.ClientSession) listing {
	t.Helper()
	l := listing{tools: map[string]string{}}
	for cursor := ""; ; {
		res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		rev, _ := res.Meta[revision.MetaKey].(string)
		l.revisions = append(l.revisions, rev)
		for _, tool := range res.Tools {
			l.tools[tool.Name] = tool.Description
		}
		if res.NextCursor == "" {
			return l
		}
		cursor = res.NextCursor
		l.cursors = append(l.cursors, cursor)
	}
}

func admin(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func TestANewcomerScansChangesAndRescans(t *testing.T) {
	cases := []struct {
		name     string
		stateful bool
		version  string
	}{
		{"stateless 2026-07-28", false, "2026-07-28"},
		{"stateful 2025-11-25", true, "2025-11-25"},
		{"stateful 2025-06-18", true, "2025-06-18"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mcpURL, adminURL := start(t, tc.stateful)
			changed := make(chan struct{}, 8)
			cs := connect(t, mcpURL, tc.version, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
			})
			if got := cs.InitializeResult().ProtocolVersion; got != tc.version {
				t.Fatalf("negotiated %s, want %s", got, tc.version)
			}
			first := walk(t, cs)
			if len(first.revisions) != 2 || first.revisions[0] == "" || first.revisions[0] != first.revisions[1] {
				t.Fatalf("revisions per page %v, want two equal ones", first.revisions)
			}
			names := []string{"inventory.lookup", "inventory.release", "inventory.reserve", "shipment.status"}
			for _, n := range names {
				if first.tools[n] == "" {
					t.Fatalf("tool %s missing from %v", n, first.tools)
				}
			}

			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "inventory.reserve",
				Arguments: map[string]any{"sku": "SKU-200", "quantity": 5}})
			if err != nil || res.IsError {
				t.Fatalf("reserve: %+v, %v", res, err)
			}
			res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "inventory.lookup",
				Arguments: map[string]any{"sku": "SKU-200"}})
			if err != nil {
				t.Fatal(err)
			}
			var level stockLevel
			raw, _ := json.Marshal(res.StructuredContent)
			if json.Unmarshal(raw, &level) != nil || level.Reserved != 5 || level.OnHand != 7 {
				t.Fatalf("lookup after reserve: %s", raw)
			}

			code, body := admin(t, http.MethodPut, adminURL+"/tools/inventory.reserve/description", "Reserve stock and repair counts.")
			if code != http.StatusOK {
				t.Fatalf("PUT description: %d %s", code, body)
			}
			_, err = cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: first.cursors[0]})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("old cursor after the change: %v, want -32602", err)
			}
			second := walk(t, cs)
			if second.revisions[0] == first.revisions[0] || second.revisions[0] != second.revisions[1] {
				t.Fatalf("revisions %v after the change, before %v", second.revisions, first.revisions)
			}
			if second.tools["inventory.reserve"] != "Reserve stock and repair counts." {
				t.Fatalf("description %q", second.tools["inventory.reserve"])
			}
			if tc.stateful { // stateless 2026-07-28 sessions get list_changed only on subscriptions/listen
				select {
				case <-changed:
				case <-time.After(5 * time.Second):
					t.Fatal("no list_changed after the change")
				}
			}
		})
	}
}

func TestAdminRemovesAndRestoresTools(t *testing.T) {
	mcpURL, adminURL := start(t, false)
	cs := connect(t, mcpURL, "", nil)
	if code, _ := admin(t, http.MethodDelete, adminURL+"/tools/shipment.status", ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d", code)
	}
	if _, ok := walk(t, cs).tools["shipment.status"]; ok {
		t.Fatal("a removed tool is still listed")
	}
	// A description change while removed does not list it again.
	if code, _ := admin(t, http.MethodPut, adminURL+"/tools/shipment.status/description", "New text."); code != http.StatusOK {
		t.Fatalf("PUT: %d", code)
	}
	if _, ok := walk(t, cs).tools["shipment.status"]; ok {
		t.Fatal("a description change listed a removed tool")
	}
	if code, _ := admin(t, http.MethodPost, adminURL+"/tools/shipment.status/restore", ""); code != http.StatusOK {
		t.Fatalf("restore: %d", code)
	}
	if d := walk(t, cs).tools["shipment.status"]; d != "New text." {
		t.Fatalf("restored tool has description %q", d)
	}
	code, body := admin(t, http.MethodGet, adminURL+"/tools", "")
	var state struct {
		Revision string
		Tools    []toolState
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &state) != nil || len(state.Tools) != 4 || state.Revision == "" {
		t.Fatalf("GET tools: %d %s", code, body)
	}
	refusals := []struct{ method, path, body string }{
		{http.MethodPut, "/tools/no.such.tool/description", "x"},
		{http.MethodPut, "/tools/inventory.lookup/description", "  "},
		{http.MethodDelete, "/tools/no.such.tool", ""},
		{http.MethodPost, "/tools/no.such.tool/restore", ""},
	}
	for _, r := range refusals {
		if code, _ := admin(t, r.method, adminURL+r.path, r.body); code < 400 {
			t.Errorf("%s %s answered %d", r.method, r.path, code)
		}
	}
}
