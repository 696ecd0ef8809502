package mcpapi

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/platform/egress"
	"github.com/toolcrib/toolcrib/services/gateway/internal/sessionpool"
)

// TestStatelessCallsReuseTheirUpstreamConnection: the gateway ends each
// call's context as soon as the call returns. Under drainAfter that no
// longer costs the pool its connection (the SDK reads the end of the
// answer's stream after handing the answer over, and a request whose
// context ends mid-read takes its connection down): calls one after
// another reuse a few connections, over SSE and over JSON answers.
func TestStatelessCallsReuseTheirUpstreamConnection(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "p", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "ping", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil
		})
	for _, jsonResponse := range []bool{false, true} {
		var conns atomic.Int64
		srv := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
			&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: jsonResponse}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		srv.Start()
		p := sessionpool.New(egress.Policy{AllowLoopback: true}, nil, func(context.Context, *mcp.ProgressNotificationParams) {})
		const calls = 300
		for range calls {
			ctx, cancel := context.WithCancel(context.Background())
			sctx, done := drainAfter(ctx)
			_, err := p.Call(sctx, sessionpool.Target{URL: srv.URL}, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
			done(err == nil)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
		p.Close()
		srv.Close()
		if n := conns.Load(); n > 10 {
			t.Errorf("json=%v: %d calls opened %d connections; want a few reused", jsonResponse, calls, n)
		}
	}
}

// TestDrainAfterEndsWithTheCallerWhileInFlight: before the answer, the
// call's context ends with the caller's (a client's cancel, the deadline);
// a failed call's ends at once; an answered call's outlives the caller's
// and ends by itself.
func TestDrainAfterEndsWithTheCallerWhileInFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sctx, done := drainAfter(ctx)
	cancel()
	<-sctx.Done() // would block forever if the caller's cancel did not reach it
	done(false)

	sctx, done = drainAfter(context.Background())
	done(false)
	if sctx.Err() == nil {
		t.Fatal("a failed call's context outlived the call")
	}

	ctx, cancel = context.WithCancel(context.Background())
	sctx, done = drainAfter(ctx)
	done(true)
	cancel()
	if sctx.Err() != nil {
		t.Fatal("an answered call's context ended with the caller's, cutting the read of the answer's end")
	}
	<-sctx.Done() // ends by itself (upstreamDrain)
}
