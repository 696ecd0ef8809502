package sessionpool

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/platform/egress"
)

// bareRoots passes a response through and counts the roots/list requests
// in it sent without params (the go-sdk's ListRoots with nil params, and
// the TypeScript SDK's listRoots, send none).
type bareRoots struct {
	http.ResponseWriter
	n *atomic.Int32
}

func (w bareRoots) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(`"method":"roots/list"`)) && !bytes.Contains(b, []byte(`"params"`)) {
		w.n.Add(1)
	}
	return w.ResponseWriter.Write(b)
}

func (w bareRoots) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// TestRequestWithoutParamsReachesTheCaller: an upstream asks the caller
// for its roots on its standalone stream with a roots/list that has no
// params (MCP allows it; server-everything sends it so). The request
// reaches the caller, naming no call, and the upstream gets its answer. Before, the pool read
// the request's _meta through the go-sdk's nil *ListRootsParams and the
// gateway process crashed (found under load in e2e/gateway's
// server-everything test, when its roots/list came after the standalone
// stream was up).
func TestRequestWithoutParamsReachesTheCaller(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "rooty", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "roots", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// A context of no request: the question goes on the
			// standalone stream, as server-everything's does (one asked
			// on the call's stream comes with the tap's mark in params).
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "roots"}}, StructuredContent: res}, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	var bare atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler.ServeHTTP(bareRoots{w, &bare}, r)
	}))
	t.Cleanup(srv.Close)

	p := New(egress.Policy{AllowLoopback: true}, nil, nil)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caller := &callRecorder{fakeCaller: fakeCaller{key: "session:r", caps: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}}, done: make(chan struct{})}}
	defer close(caller.done)
	res, err := p.CallFor(WithCall(ctx, "call-1"), Target{URL: srv.URL}, &mcp.CallToolParams{Name: "roots", Arguments: map[string]any{}}, caller)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("the call failed: %+v", res.Content)
	}
	if bare.Load() == 0 {
		t.Fatal("no roots/list went without params: the test did not test it")
	}
	if caller.got("roots/list") != 1 || caller.call.Load() != "" {
		t.Fatalf("the caller got %v, under call %q", caller.methods, caller.call.Load())
	}
}

// callRecorder is a [fakeCaller] that answers roots/list with no roots and
// records the call id a request came under.
type callRecorder struct {
	fakeCaller
	call atomic.Value
}

func (c *callRecorder) Handle(ctx context.Context, t Target, method string, req mcp.Request) (mcp.Result, error) {
	if _, err := c.fakeCaller.Handle(ctx, t, method, req); err != nil {
		return nil, err
	}
	c.call.Store(CallOf(ctx))
	return &mcp.ListRootsResult{Roots: []*mcp.Root{}}, nil
}
