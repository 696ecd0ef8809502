package sessionpool

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/platform/egress"
	"github.com/toolcrib/toolcrib/services/gateway/gatewaytest"
)

// injected are the messages of [gatewaytest.HostileMessages].
var injected = gatewaytest.HostileMessages

// injectAt is an upstream whose tool "inject" logs "INJECT-n" on its
// standalone stream, which the response writer replaces by injected[n],
// then logs "AFTER-n" there; "echo" answers.
func injectAt(t *testing.T) string {
	server := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{
		Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{}}})
	type args struct {
		N int `json:"n"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "inject"}, func(_ context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		// A context of no request: the standalone stream.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, d := range []string{"INJECT-", "AFTER-"} {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: d + strconv.Itoa(a.N)}); err != nil {
				return nil, nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil, nil
	})
	server.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo"}}}, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(gatewaytest.Rewrite(handler, injectMarked))
	t.Cleanup(srv.Close)
	return srv.URL
}

var injectLine = regexp.MustCompile(`data: [^\n]*"INJECT-(\d+)"[^\n]*`)

// injectMarked replaces each INJECT-n log line by injected[n].
func injectMarked(b []byte) []byte {
	return injectLine.ReplaceAllFunc(b, func(line []byte) []byte {
		n, _ := strconv.Atoi(string(injectLine.FindSubmatch(line)[1]))
		return []byte("data: " + injected[n])
	})
}

// TestHostileUpstreamMessagesLeaveThePoolStanding: each message of
// [injected], sent on a caller's upstream session's standalone stream,
// leaves the process running (the test binary is the gateway here: a
// panic on any upstream goroutine ends it) and the caller able to call the
// upstream again. The caller declares everything an upstream may ask.
// Written after roots/list without params crashed the gateway
// ([TestRequestWithoutParamsReachesTheCaller]).
func TestHostileUpstreamMessagesLeaveThePoolStanding(t *testing.T) {
	url := injectAt(t)
	p := New(egress.Policy{AllowLoopback: true}, nil, nil)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	caller := &fakeCaller{key: "session:h", done: make(chan struct{}), caps: &mcp.ClientCapabilities{
		RootsV2: &mcp.RootCapabilities{}, Sampling: &mcp.SamplingCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}}
	defer close(caller.done)
	target := Target{URL: url}
	for n, msg := range injected {
		logs := caller.got("notifications/message")
		res, err := p.CallFor(ctx, target, &mcp.CallToolParams{Name: "inject", Arguments: map[string]any{"n": n}}, caller)
		if err != nil || res.IsError {
			t.Fatalf("%s: the inject call: %v %+v", msg, err, res)
		}
		// AFTER-n reaches the caller once the message before it was
		// handled (or the session ended on it: then the next call opens
		// a new one).
		for deadline := time.Now().Add(3 * time.Second); caller.got("notifications/message") == logs && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		res, err = p.CallFor(ctx, target, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, caller)
		if err != nil || res.IsError {
			t.Fatalf("after %s the caller cannot call the upstream: %v %+v", msg, err, res)
		}
	}
	if n := caller.got("notifications/message"); n < len(injected)/2 {
		t.Fatalf("the caller got %d log messages for %d injections: the stream did not carry them", n, len(injected))
	}
}
