package sessionpool

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/platform/egress"
)

// chattyServer serves a tool "chatty" that logs n messages ("m0", …) on
// its call's stream, at info, then one at debug, and answers; stateful or
// stateless (2026-07-28: it logs at the level the request's _meta names).
func chattyServer(t *testing.T, stateless bool, n int) string {
	server := mcp.NewServer(&mcp.Implementation{Name: "chatty", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{
		Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{}}})
	server.AddTool(&mcp.Tool{Name: "chatty", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i := range n {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "chatty", Data: fmt.Sprintf("m%d", i)})
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: "detail"})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// sinkLog records what a call's log sink got and whether the call had
// returned by then. Each message takes a while to relay (a slow client):
// the SDK would hand the answer over meanwhile.
type sinkLog struct {
	returned atomic.Bool
	mu       sync.Mutex
	got      []string
	late     []string
}

func (s *sinkLog) sink(p *mcp.LoggingMessageParams) {
	time.Sleep(20 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	d := fmt.Sprint(p.Data)
	s.got = append(s.got, d)
	if s.returned.Load() {
		s.late = append(s.late, d)
	}
}

func (s *sinkLog) snapshot() ([]string, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got), slices.Clone(s.late)
}

// On a caller's own session to a stateful server, the log messages the
// server sends on a call's stream reach the call's sink, in order, every
// one before the call returns, though each takes a while to relay (the
// SDK's handler goroutine let the answer overtake them, and the gateway
// then sent them outside the call, labelled "upstream"); the caller's Log
// gets none of them (no message twice). The pool asked the server for
// every level: the debug message arrives too.
func TestCallerLogsReachTheCallBeforeItsAnswer(t *testing.T) {
	url := chattyServer(t, false, 5)
	p := New(egress.Policy{AllowLoopback: true}, nil, nil)
	defer p.Close()
	caller := &fakeCaller{key: "session:a", done: make(chan struct{})}
	defer close(caller.done)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 2 { // the first call on a new session, and a later one
		var s sinkLog
		res, err := p.CallFor(WithLogSink(ctx, s.sink), Target{URL: url}, &mcp.CallToolParams{Name: "chatty", Arguments: map[string]any{}}, caller)
		s.returned.Store(true)
		if err != nil || res.IsError {
			t.Fatalf("round %d: %v %+v", round, err, res)
		}
		got, late := s.snapshot()
		if want := []string{"m0", "m1", "m2", "m3", "m4", "detail"}; !slices.Equal(got, want) || len(late) != 0 {
			t.Fatalf("round %d: before the answer %q (want %q); after it %q", round, got, want, late)
		}
	}
	if n := caller.got("notifications/message"); n != 0 {
		t.Fatalf("the caller's Log got %d messages of the calls' streams too", n)
	}
}

// On the shared session to a stateless (2026-07-28) server, a call made
// under a log sink that names a level in its _meta gets the messages at
// that level or above on its sink before it returns; without a level the
// server sends none, and without a sink none is kept.
func TestSharedSessionCallLogs(t *testing.T) {
	url := chattyServer(t, true, 3)
	p := New(egress.Policy{AllowLoopback: true}, nil, nil)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := func(sink func(*mcp.LoggingMessageParams), level string) {
		t.Helper()
		params := &mcp.CallToolParams{Name: "chatty", Arguments: map[string]any{}, Meta: mcp.Meta{}}
		if level != "" {
			params.Meta[mcp.MetaKeyLogLevel] = level
		}
		cctx := ctx
		if sink != nil {
			cctx = WithLogSink(ctx, sink)
		}
		if res, err := p.Call(cctx, Target{URL: url}, params); err != nil || res.IsError {
			t.Fatalf("%v %+v", err, res)
		}
	}
	var info sinkLog
	call(info.sink, "info")
	info.returned.Store(true)
	if got, late := info.snapshot(); !slices.Equal(got, []string{"m0", "m1", "m2"}) || len(late) != 0 {
		t.Fatalf("level info: before the answer %q, after it %q", got, late)
	}
	var none sinkLog
	call(none.sink, "")
	call(nil, "debug")
	none.returned.Store(true)
	if got, _ := none.snapshot(); len(got) != 0 {
		t.Fatalf("no level named: %q", got)
	}
}
