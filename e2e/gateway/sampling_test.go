package gateway_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/gateway"
)

// sampler is a client's sampling handler recording what it was asked.
type sampler struct {
	mu    sync.Mutex
	asked []*mcp.CreateMessageRequest
}

// samplerAnswer is what every sampler answers.
const samplerAnswer = "Your shipment S-1 is on its way."

func (s *sampler) createMessage(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	s.mu.Lock()
	s.asked = append(s.asked, req)
	s.mu.Unlock()
	return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: samplerAnswer}}, nil
}

func (s *sampler) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.asked)
}

// lastOf is what the upstream's last call of tool recorded.
func lastOf(t *testing.T, w *gatewayworld.World, tool string) map[string]any {
	t.Helper()
	calls := callsOf(w, tool)
	if len(calls) == 0 {
		t.Fatalf("the upstream ran no %s", tool)
	}
	return calls[len(calls)-1].Args
}

// TestGatewayRelaysSamplingOnlyWhereTheContractAllows: in front of a
// stateful go-sdk upstream, a 2025-11-25 client that declared sampling
// gets the upstream's sampling/createMessage during a call of draft_reply,
// whose approved contract allows sampling: named as from the server and
// tool in `_meta`, its includeContext dropped; the client's answer reaches
// the upstream. During a call of ping, whose contract does not allow it,
// the upstream is refused and the client's handler is never called. A
// client that did not declare sampling is never asked, and the upstream
// is refused, even for draft_reply.
func TestGatewayRelaysSamplingOnlyWhereTheContractAllows(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{StatefulUpstream: true})
	alice := w.Token(t, "alice", gatewayworld.TenantA)

	s := &sampler{}
	cs := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{CreateMessageHandler: s.createMessage}, "2025-11-25")

	// Not allowed by ping's contract: refused, the client not asked.
	if res := call(t, cs, "ping", nil); res.IsError || text(res) != "pong" {
		t.Fatalf("ping: %q", text(res))
	}
	if got := lastPing(t, w); got["sampling"] != "refused" {
		t.Fatalf("ping's sampling through the gateway: %v", got["sampling"])
	}
	if n := s.count(); n != 0 {
		t.Fatalf("the client's sampling handler was called %d times for ping, whose contract does not allow sampling", n)
	}

	// Allowed by draft_reply's contract: relayed and answered.
	res := call(t, cs, gatewayworld.DraftReply, nil)
	if res.IsError {
		t.Fatalf("draft_reply: %q", text(res))
	}
	if got := lastOf(t, w, gatewayworld.DraftReply)["sampling"]; got != "answered: "+samplerAnswer {
		t.Fatalf("the upstream got %q, want the client's answer", got)
	}
	if n := s.count(); n != 1 {
		t.Fatalf("the client's sampling handler was called %d times, want 1", n)
	}
	s.mu.Lock()
	asked := s.asked[0].Params
	s.mu.Unlock()
	if len(asked.Messages) != 1 || asked.MaxTokens != 64 {
		t.Fatalf("the client was asked %+v", asked)
	}
	if tc, ok := asked.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != gatewayworld.DraftPrompt {
		t.Fatalf("the client was asked %+v", asked.Messages[0].Content)
	}
	from, _ := asked.Meta["dev.toolcrib/relayed-from"].(map[string]any)
	if from["server"] != gatewayworld.ServerID || from["tool"] != gatewayworld.DraftReply {
		t.Fatalf("the request does not name its server and tool: _meta %v", asked.Meta)
	}
	if asked.IncludeContext != "" {
		t.Fatalf("includeContext %q reached the client: it would put what the client has from other servers into this upstream's completion", asked.IncludeContext)
	}

	// Offering the model tools: refused to a client that declared sampling
	// without tools, relayed to one that declared them.
	if res := call(t, cs, gatewayworld.DraftReply, map[string]any{"tools": true}); res.IsError {
		t.Fatalf("draft_reply with tools: %q", text(res))
	}
	if got, _ := lastOf(t, w, gatewayworld.DraftReply)["sampling"].(string); !strings.HasPrefix(got, "refused: ") || !strings.Contains(got, "sampling with tools") {
		t.Fatalf("tools offered to a client that declared sampling without them: the upstream got %q", got)
	}
	if n := s.count(); n != 1 {
		t.Fatalf("the client's sampling handler was called %d times, want still 1", n)
	}
	var withTools []string
	var wmu sync.Mutex
	ts := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{CreateMessageWithToolsHandler: func(_ context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
		wmu.Lock()
		defer wmu.Unlock()
		for _, tool := range req.Params.Tools {
			withTools = append(withTools, tool.Name)
		}
		return &mcp.CreateMessageWithToolsResult{Role: "assistant", Model: "test-model", Content: []mcp.Content{&mcp.TextContent{Text: samplerAnswer}}}, nil
	}}, "2025-11-25")
	if res := call(t, ts, gatewayworld.DraftReply, map[string]any{"tools": true}); res.IsError {
		t.Fatalf("draft_reply with tools: %q", text(res))
	}
	wmu.Lock()
	offered := slices.Clone(withTools)
	wmu.Unlock()
	if got := lastOf(t, w, gatewayworld.DraftReply)["sampling"]; got != "answered: "+samplerAnswer || !slices.Equal(offered, []string{gatewayworld.DraftTool}) {
		t.Fatalf("tools offered to a client that declared them: the upstream got %q, the client was offered %q", got, offered)
	}

	// A client that declared no sampling: refused, never asked, even where
	// the contract allows it.
	bare := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}, "2025-11-25")
	if res := call(t, bare, gatewayworld.DraftReply, nil); res.IsError {
		t.Fatalf("bare draft_reply: %q", text(res))
	}
	got, _ := lastOf(t, w, gatewayworld.DraftReply)["sampling"].(string)
	if !strings.HasPrefix(got, "refused: ") || !strings.Contains(got, "did not declare") {
		t.Fatalf("a client without the sampling capability: the upstream got %q", got)
	}
	if n := s.count(); n != 1 {
		t.Fatalf("another session's call reached the first client's sampling handler (%d calls)", n)
	}
}

// TestGatewayBoundsSamplingMaxTokens: with --sampling-max-tokens 32, an
// upstream's sampling/createMessage asking for 64 tokens (draft_reply,
// whose contract allows sampling) is refused to the upstream with a
// JSON-RPC error naming the bound, and the client's sampling handler is
// never called; at the default bound (4096) the same request is relayed
// (TestGatewayRelaysSamplingOnlyWhereTheContractAllows).
func TestGatewayBoundsSamplingMaxTokens(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{StatefulUpstream: true, Gateway: func(c *gateway.Config) { c.SamplingMaxTokens = 32 }})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	s := &sampler{}
	cs := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{CreateMessageHandler: s.createMessage}, "2025-11-25")
	if res := call(t, cs, gatewayworld.DraftReply, nil); res.IsError {
		t.Fatalf("draft_reply: %q", text(res))
	}
	got, _ := lastOf(t, w, gatewayworld.DraftReply)["sampling"].(string)
	if !strings.HasPrefix(got, "refused: ") || !strings.Contains(got, "maxTokens") || !strings.Contains(got, "(32)") {
		t.Fatalf("a sampling request over the bound: the upstream got %q", got)
	}
	if n := s.count(); n != 0 {
		t.Fatalf("the client's sampling handler was called %d times for a request over the bound", n)
	}
}

// TestGatewayAttributesWhatAnUpstreamAsksToTheCallThatAsked: two calls of
// one client session to one stateful upstream are in flight at once. ping
// (whose contract does not allow sampling) asks its question first and
// waits for the client; then draft_reply (whose contract allows it)
// starts, and its sampling request waits in the client; then ping's
// question is answered and ping asks for a sampling while draft_reply is
// the newest call in flight. The gateway knows each request by the stream
// it was asked on: ping's question reaches the client as from ping, ping's
// sampling is refused without asking the client (not relayed as if
// draft_reply had asked it), and draft_reply's is relayed as from
// draft_reply, once.
func TestGatewayAttributesWhatAnUpstreamAsksToTheCallThatAsked(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{StatefulUpstream: true})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	var (
		mu       sync.Mutex
		sampled  []string // the tool each sampling request named
		question string
	)
	pingAsked, releasePing, pingDone := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	elicit := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		question = req.Params.Message
		mu.Unlock()
		pingAsked <- struct{}{}
		select {
		case <-releasePing:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"dock": "D1"}}, nil
	}
	sample := func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		from, _ := req.Params.Meta["dev.toolcrib/relayed-from"].(map[string]any)
		tool, _ := from["tool"].(string)
		mu.Lock()
		sampled = append(sampled, tool)
		mu.Unlock()
		if tool == gatewayworld.DraftReply {
			// Held until ping has ended, so draft_reply stays the newest
			// call in flight while ping asks. (Bounded: a sampling of
			// ping's taken for draft_reply's would wait here otherwise.)
			select {
			case <-pingDone:
			case <-time.After(10 * time.Second):
			}
		}
		return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: samplerAnswer}}, nil
	}
	cs := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{ElicitationHandler: elicit, CreateMessageHandler: sample}, "2025-11-25")

	type result struct {
		res *mcp.CallToolResult
		err error
	}
	callAsync := func(name string) chan result {
		ch := make(chan result, 1)
		go func() {
			res, err := cs.CallTool(ctxFor(t), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
			ch <- result{res, err}
		}()
		return ch
	}
	pingc := callAsync("ping")
	select {
	case <-pingAsked:
	case <-time.After(30 * time.Second):
		t.Fatal("ping's question never reached the client")
	}
	draftc := callAsync(gatewayworld.DraftReply)
	servicetest.Eventually(t, 30*time.Second, "draft_reply's sampling request at the client", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(sampled) > 0
	})
	close(releasePing)
	p := <-pingc
	close(pingDone)
	d := <-draftc
	if p.err != nil || p.res.IsError || d.err != nil || d.res.IsError {
		t.Fatalf("ping: %v %v; draft_reply: %v %v", p.err, p.res, d.err, d.res)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "[server " + gatewayworld.ServerID + ", tool ping] " + gatewayworld.PingQuestion; question != want {
		t.Fatalf("ping's question reached the client as %q, want %q", question, want)
	}
	if got := lastPing(t, w); got["sampling"] != "refused" || got["elicit"] != "accept D1" {
		t.Fatalf("ping (sampling not allowed) asked while draft_reply was in flight: the upstream got %v", got)
	}
	if !slices.Equal(sampled, []string{gatewayworld.DraftReply}) {
		t.Fatalf("the client was asked for samplings as from %q, want only draft_reply's", sampled)
	}
	if got := lastOf(t, w, gatewayworld.DraftReply)["sampling"]; got != "answered: "+samplerAnswer {
		t.Fatalf("draft_reply's sampling: the upstream got %q", got)
	}
}
