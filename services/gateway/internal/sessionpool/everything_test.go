package sessionpool

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/platform/egress"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// fakeCaller is a [Caller] that declares caps and records what the
// upstream sent it; it answers elicitations with answer.
type fakeCaller struct {
	key    string
	caps   *mcp.ClientCapabilities
	answer *mcp.ElicitResult
	done   chan struct{}

	mu      sync.Mutex
	methods []string
}

func (c *fakeCaller) Key() string                           { return c.key }
func (c *fakeCaller) Capabilities() *mcp.ClientCapabilities { return c.caps }
func (c *fakeCaller) Done() <-chan struct{}                 { return c.done }

func (c *fakeCaller) Handle(_ context.Context, _ Target, method string, _ mcp.Request) (mcp.Result, error) {
	c.mu.Lock()
	c.methods = append(c.methods, method)
	c.mu.Unlock()
	if method == "elicitation/create" {
		return c.answer, nil
	}
	return nil, nil
}

// Log records a log message as its method.
func (c *fakeCaller) Log(context.Context, Target, *mcp.LoggingMessageParams) {
	c.mu.Lock()
	c.methods = append(c.methods, "notifications/message")
	c.mu.Unlock()
}

func (c *fakeCaller) got(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.methods {
		if m == method {
			n++
		}
	}
	return n
}

// startEverything runs server-everything over streamable HTTP on a
// loopback port ([servicetest.StartEverything]).
func startEverything(t *testing.T) string {
	index, _ := filepath.Abs("../../../../e2e/ts/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	return servicetest.StartEverything(t, index)
}

// Against server-everything over streamable HTTP (stateful, newest
// protocol 2025-11-25): the pool falls back from 2026-07-28 and keeps a
// session; a caller's own session declares the caller's elicitation
// capability, so the server offers its elicitation tool to it (and not on
// the shared session, which declares none), and the server's
// elicitation/create reaches the caller; progress of
// trigger-long-running-operation reaches onProgress, every step before the
// call returns, on the first call of a new session; the simulated log
// messages reach the caller on its standalone stream.
func TestServerEverythingOverHTTP(t *testing.T) {
	url := startEverything(t)
	var mu sync.Mutex
	var progress []float64
	p := New(egress.Policy{AllowLoopback: true}, nil, func(_ context.Context, n *mcp.ProgressNotificationParams) {
		mu.Lock()
		progress = append(progress, n.Progress)
		mu.Unlock()
	})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	target := Target{URL: url}
	caller := &fakeCaller{key: "session:a", caps: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
		answer: &mcp.ElicitResult{Action: "decline"}, done: make(chan struct{})}
	defer close(caller.done)

	// The first call on a new session reports every step before it returns.
	params := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 4}}
	params.SetProgressToken("gw-token")
	if res, err := p.CallFor(ctx, target, params, caller); err != nil || res.IsError {
		t.Fatalf("long-running operation: %v %+v", err, res)
	}
	mu.Lock()
	got := slices.Clone(progress)
	mu.Unlock()
	if len(got) != 4 || got[3] != 4 {
		t.Fatalf("progress before the answer: %v", got)
	}

	mine, err := p.SessionFor(ctx, target, caller)
	if err != nil {
		t.Fatal(err)
	}
	if v := mine.InitializeResult().ProtocolVersion; v != "2025-11-25" || mine.ID() == "" {
		t.Fatalf("negotiated %q, session %q", v, mine.ID())
	}
	shared, err := p.Session(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	names := func(cs *mcp.ClientSession) []string {
		var out []string
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tool.Name)
		}
		return out
	}
	if n := names(mine); !slices.Contains(n, "trigger-elicitation-request") {
		t.Fatalf("the caller's session lists %v", n)
	}
	if n := names(shared); slices.Contains(n, "trigger-elicitation-request") {
		t.Fatalf("the shared session, which declares no elicitation, lists %v", n)
	}

	if _, err := p.CallFor(ctx, target, &mcp.CallToolParams{Name: "trigger-elicitation-request", Arguments: map[string]any{}}, caller); err != nil {
		t.Fatal(err)
	}
	if caller.got("elicitation/create") != 1 {
		t.Fatalf("the caller got %v", caller.methods)
	}

	if _, err := p.CallFor(ctx, target, &mcp.CallToolParams{Name: "toggle-simulated-logging", Arguments: map[string]any{}}, caller); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); caller.got("notifications/message") < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("log messages: %d", caller.got("notifications/message"))
		}
	}
}
