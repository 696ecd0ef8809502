package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
)

// newClient connects to the gateway at 2026-07-28 as a client that answers
// input requests itself (the SDK's automatic answering is off), declaring
// caps.
func newClient(t *testing.T, url, token string, caps *mcp.ClientCapabilities) *mcp.ClientSession {
	t.Helper()
	return gatewayworld.ConnectAt(t, url, token, &mcp.ClientOptions{Capabilities: caps, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}, "2026-07-28")
}

func accept(content map[string]any) *mcp.ElicitResult {
	return &mcp.ElicitResult{Action: "accept", Content: content}
}

func jsonrpcCode(err error) int64 {
	var jerr *jsonrpc.Error
	if errors.As(err, &jerr) {
		return jerr.Code
	}
	return 0
}

func resultText(r *mcp.CallToolResult) string { return gatewayworld.Text(r) }

// An upstream's input-required results (MCP 2026-07-28) pass through the
// gateway: the client gets the input requests and a state of the
// gateway's (never the upstream's), answers them in its retry, and each
// round is a call of its own (a new Check and a new lease, so a new
// admission receipt and execution receipt). A state goes upstream again
// only with a retry of the call it was issued for, by the principal it was
// issued to, once: a replay, another user, another tool or other
// arguments get a JSON-RPC invalid-params error.
func TestGatewayPassesInputRequiredResults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w := fronted(t, ctx)
	alice := w.St.Auth.User(t, "alice", tenant, "hosts")
	bob := w.St.Auth.User(t, "bob", tenant, "hosts")
	caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}
	cs := newClient(t, w.GatewayURL, alice, caps)
	bobs := newClient(t, w.GatewayURL, bob, caps)
	const tool = "test_input_required_result_multi_round"

	r1, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !r1.NeedsInput() || r1.InputRequests["step1"] == nil || r1.RequestState == "" {
		t.Fatalf("round 1: %+v", r1)
	}
	if strings.Contains(r1.RequestState, "round") {
		t.Fatalf("the client sees the upstream's state: %q", r1.RequestState)
	}
	retry := func(cs *mcp.ClientSession, name, state, key string, content map[string]any, args map[string]any) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args,
			InputResponses: mcp.InputResponseMap{key: accept(content)}, RequestState: state})
	}

	// Another user of the same tenant and group presenting alice's state:
	// refused, and the state is spent.
	if _, err := retry(bobs, tool, r1.RequestState, "step1", map[string]any{"name": "Mallory"}, map[string]any{}); jsonrpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("bob presenting alice's state: %v", err)
	}
	if _, err := retry(cs, tool, r1.RequestState, "step1", map[string]any{"name": "Alice"}, map[string]any{}); jsonrpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("alice's state after bob spent it: %v", err)
	}

	r1, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil || !r1.NeedsInput() {
		t.Fatalf("round 1 again: %+v %v", r1, err)
	}
	r2, err := retry(cs, tool, r1.RequestState, "step1", map[string]any{"name": "Alice"}, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if !r2.NeedsInput() || r2.InputRequests["step2"] == nil || r2.RequestState == r1.RequestState {
		t.Fatalf("round 2: %+v", r2)
	}
	// The round-1 state again (a replay): refused.
	if _, err := retry(cs, tool, r1.RequestState, "step1", map[string]any{"name": "Alice"}, map[string]any{}); jsonrpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("a replayed state: %v", err)
	}
	r3, err := retry(cs, tool, r2.RequestState, "step2", map[string]any{"color": "blue"}, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if r3.NeedsInput() || r3.IsError || resultText(r3) != "Multi-round complete: Alice likes blue" {
		t.Fatalf("round 3: %+v %q", r3, resultText(r3))
	}
	// Every round was checked and leased anew.
	receipts, leases := map[any]bool{}, map[any]bool{}
	for i, r := range []*mcp.CallToolResult{r1, r2, r3} {
		rc, lc := r.Meta["dev.toolcrib/receipt"], r.Meta["dev.toolcrib/execution-receipt"]
		if rc == nil || lc == nil || receipts[rc] || leases[lc] {
			t.Fatalf("round %d: receipt %v, execution receipt %v (seen: %v %v)", i+1, rc, lc, receipts, leases)
		}
		receipts[rc], leases[lc] = true, true
	}

	// A state moved to another tool, or to other arguments: refused.
	r1, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil || !r1.NeedsInput() {
		t.Fatalf("round 1 again: %+v %v", r1, err)
	}
	if _, err := retry(cs, "test_input_required_result_tampered_state", r1.RequestState, "confirm", map[string]any{"ok": true}, map[string]any{}); jsonrpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("a state moved to another tool: %v", err)
	}
	r1, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil || !r1.NeedsInput() {
		t.Fatalf("round 1 again: %+v %v", r1, err)
	}
	if _, err := retry(cs, tool, r1.RequestState, "step1", map[string]any{"name": "Alice"}, map[string]any{"extra": "x"}); jsonrpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("a state moved to other arguments: %v", err)
	}
}

// An upstream's MissingRequiredClientCapability error (-32021) reaches the
// client as that JSON-RPC error, naming the capability. The upstream
// learns of the client's capabilities only those an input request may use
// through the gateway: elicitation and roots, and sampling only for a tool
// whose approved contract allows it ([samplingTools]), so a client that
// declares sampling still gets -32021 from test_missing_capability, whose
// contract does not. An upstream's elicitation is shown as from its server
// and tool, a sampling request names them in `_meta`.
func TestGatewayPassesClientCapabilities(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w := fronted(t, ctx)
	host := w.St.Auth.User(t, "host", tenant, "hosts")
	missing := func(cs *mcp.ClientSession) {
		t.Helper()
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_missing_capability", Arguments: map[string]any{}})
		var jerr *jsonrpc.Error
		if !errors.As(err, &jerr) || jerr.Code != mcp.CodeMissingRequiredClientCapabilities {
			t.Fatalf("test_missing_capability: %v", err)
		}
		var data struct {
			RequiredCapabilities map[string]json.RawMessage `json:"requiredCapabilities"`
		}
		if err := json.Unmarshal(jerr.Data, &data); err != nil || data.RequiredCapabilities["sampling"] == nil {
			t.Fatalf("error data %s: %v", jerr.Data, err)
		}
	}
	none := newClient(t, w.GatewayURL, host, &mcp.ClientCapabilities{})
	missing(none)
	all := newClient(t, w.GatewayURL, host, &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}, Elicitation: &mcp.ElicitationCapabilities{}})
	missing(all)

	res, err := all.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_capabilities", Arguments: map[string]any{}})
	if err != nil || !res.NeedsInput() || len(res.InputRequests) != 2 {
		t.Fatalf("capability-aware input requests: %+v %v", res, err)
	}
	e, ok := res.InputRequests["user_name"].(*mcp.ElicitParams)
	if !ok || e.Message != "[server "+serverID+", tool test_input_required_result_capabilities] What is your name?" {
		t.Fatalf("input requests %+v", res.InputRequests)
	}
	wantSampling(t, res.InputRequests["greeting"], "test_input_required_result_capabilities")
	res, err = none.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_capabilities", Arguments: map[string]any{}})
	if err != nil || res.NeedsInput() || !strings.Contains(resultText(res), "No declared client capability") {
		t.Fatalf("a client that declared nothing: %+v %v", res, err)
	}

	res, err = all.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_sampling", Arguments: map[string]any{}})
	if err != nil || !res.NeedsInput() || len(res.InputRequests) != 1 {
		t.Fatalf("an upstream asking for sampling, its contract allowing it: %+v %v", res, err)
	}
	for _, ir := range res.InputRequests {
		wantSampling(t, ir, "test_input_required_result_sampling")
	}
}

// wantSampling checks that ir is a sampling request passed as from tool of
// the conformance server, includeContext dropped.
func wantSampling(t *testing.T, ir mcp.InputRequest, tool string) {
	t.Helper()
	var meta mcp.Meta
	var include string
	switch p := ir.(type) {
	case *mcp.CreateMessageParams:
		meta, include = p.Meta, p.IncludeContext
	case *mcp.CreateMessageWithToolsParams:
		meta, include = p.Meta, p.IncludeContext
	default:
		t.Fatalf("not a sampling request: %T", ir)
	}
	b, _ := json.Marshal(meta["dev.toolcrib/relayed-from"])
	if string(b) != `{"server":"`+serverID+`","tool":"`+tool+`"}` || include != "" {
		t.Fatalf("sampling request passed with relayed-from %s, includeContext %q", b, include)
	}
}

// logs collects the log messages a client receives.
type logs struct {
	mu  sync.Mutex
	got []*mcp.LoggingMessageParams
}

func (l *logs) handle(_ context.Context, req *mcp.LoggingMessageRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, req.Params)
}

func (l *logs) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.got)
}

// The log messages a stateless (2026-07-28) upstream sends on a call's
// response stream reach a 2025-11-25 client's session at the level it set
// (logging/setLevel); a client that set a level above the messages', or
// none, gets none of them. The client holds its standalone stream, as the
// SDKs' clients do: a message the gateway handles after the call's answer
// went out is relayed there.
func TestGatewayRelaysStatelessUpstreamLogs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w := fronted(t, ctx)
	host := w.St.Auth.User(t, "host", tenant, "hosts")
	connect := func(l *logs) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "logs-test", Version: "1.0.0"}, &mcp.ClientOptions{LoggingMessageHandler: l.handle})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: w.GatewayURL, HTTPClient: gatewayworld.HTTPClient(host)},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	var debug, errorsOnly, unset logs
	for _, c := range []struct {
		l     *logs
		level mcp.LoggingLevel
	}{{&unset, ""}, {&errorsOnly, "error"}, {&debug, "debug"}} {
		cs := connect(c.l)
		if c.level != "" {
			if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: c.level}); err != nil {
				t.Fatal(err)
			}
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_tool_with_logging", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("level %q: %+v %v", c.level, res, err)
		}
	}
	// The bound only ends a failing test; it asserts no timing.
	for deadline := time.Now().Add(30 * time.Second); debug.count() < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a client at level debug got %d of the tool's 3 log messages", debug.count())
		}
	}
	debug.mu.Lock()
	var got []string
	for _, m := range debug.got {
		got = append(got, fmt.Sprint(m.Data))
	}
	debug.mu.Unlock()
	if want := "Tool execution started|Tool processing data|Tool execution completed"; strings.Join(got, "|") != want {
		t.Fatalf("messages %q, want %q", got, want)
	}
	if n := errorsOnly.count() + unset.count(); n != 0 {
		t.Fatalf("clients at level error or without a level got %d info messages", n)
	}
}
