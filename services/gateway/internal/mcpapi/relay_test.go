package mcpapi

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/services/gateway/internal/sessionpool"
)

// One call's relayed log messages are bounded: the first maxLogsPerCall
// pass (data over maxLogData bytes of JSON cut to a string of them, the
// logger naming the origin), then one warning saying the rest are
// dropped, then nothing; messages below the client's level (debug under
// info) are neither relayed nor counted, so a chatty debug logger does not
// use up the bound.
func TestLogBudgetBoundsOneCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server := mcp.NewServer(&mcp.Implementation{Name: "gw", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}}})
	var mu sync.Mutex
	var got []*mcp.LoggingMessageParams
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
		mu.Lock()
		got = append(got, req.Params)
		mu.Unlock()
	}})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	var b logBudget
	const origin = "server inventory, tool ping: l"
	b.relay(ss, ctx, &mcp.LoggingMessageParams{Level: "info", Data: map[string]any{"big": strings.Repeat("x", 2*maxLogData)}}, origin, "info")
	for range 2 * maxLogsPerCall {
		b.relay(ss, ctx, &mcp.LoggingMessageParams{Level: "debug", Data: "below the level"}, origin, "info")
	}
	for range maxLogsPerCall + 10 {
		b.relay(ss, ctx, &mcp.LoggingMessageParams{Level: "info", Data: "m"}, origin, "info")
	}
	want := maxLogsPerCall + 1 // the big one, 99 "m" (debug ones neither sent nor counted), the warning
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != want {
		t.Fatalf("%d messages relayed, want %d", len(got), want)
	}
	big, ok := got[0].Data.(string)
	if !ok || len(big) > maxLogData+len("…") || !strings.HasPrefix(big, `{"big":"xxx`) {
		t.Fatalf("data over the bound relayed as %T of %d bytes", got[0].Data, len(big))
	}
	for i, m := range got[1 : want-1] {
		if m.Data != "m" || m.Logger != origin {
			t.Fatalf("message %d: %+v", i+1, m)
		}
	}
	if last := got[want-1]; last.Data != logsDropped || last.Level != "warning" || last.Logger != origin {
		t.Fatalf("the last message %+v, want the warning that the rest are dropped", last)
	}
}

// What an upstream asks names a call only by the id the gateway's tap
// marked it with on that call's own response stream: a request from an
// HTTP upstream without the mark (its standalone stream) or with an id it
// made up is refused even while a call is in flight to it; an id is
// known only on its own upstream (another upstream that learned it names
// nothing) and only while its call is in flight. A stdio server's request
// (its one pipe carries no mark) names the session's one call in flight to
// it, and none when there are two.
func TestAnUpstreamNamesOnlyTheCallItWasAskedOn(t *testing.T) {
	ctx := context.Background()
	r := &relay{inFlight: map[string][]*relayCall{}}
	up := sessionpool.Target{URL: "http://127.0.0.1:1/mcp"}
	other := sessionpool.Target{URL: "http://127.0.0.1:2/mcp"}
	stdio := sessionpool.Target{Command: "inventory-mcp", ContentIdentity: "sha256:x"}
	ask := &mcp.ElicitRequest{Params: &mcp.ElicitParams{Message: "ok?"}}
	refused := func(ctx context.Context, tg sessionpool.Target, want string) {
		t.Helper()
		_, err := r.Handle(ctx, tg, "elicitation/create", ask)
		var jerr *jsonrpc.Error
		if !errors.As(err, &jerr) || jerr.Message != want {
			t.Fatalf("Handle: %v, want the refusal %q", err, want)
		}
	}

	callCtx, end := r.begin(ctx, ctx, up.Identity(), "inv", "ping", false)
	id := sessionpool.CallOf(callCtx)
	if id == "" {
		t.Fatal("the call's upstream context carries no id for the tap to mark with")
	}
	if c := r.asking(up, id); c == nil || c.tool != "ping" {
		t.Fatalf("the marked request names %v, want the call to ping", c)
	}
	refused(ctx, up, relayNoCall)                                 // standalone stream: no mark
	refused(sessionpool.WithCall(ctx, "forged"), up, relayNoCall) // a mark the upstream made up
	refused(sessionpool.WithCall(ctx, id), other, relayNoCall)    // the id, from another upstream
	refused(sessionpool.WithCall(ctx, id+"A"), up, relayNoCall)   // close to it
	end()
	refused(sessionpool.WithCall(ctx, id), up, relayNoCall) // its call ended

	_, end1 := r.begin(ctx, ctx, stdio.Identity(), "inv", "reserve", false)
	if c := r.asking(stdio, ""); c == nil || c.tool != "reserve" {
		t.Fatalf("a stdio server's request with one call in flight names %v, want the call to reserve", c)
	}
	_, end2 := r.begin(ctx, ctx, stdio.Identity(), "inv", "ping", false)
	refused(ctx, stdio, relayStdioAmbiguous)
	end1()
	end2()
	refused(ctx, stdio, relayNoCall)
}

// TestRelayTakesRequestsWithoutParams: what an upstream sends without
// params (the go-sdk hands the relay a nil params pointer) is refused or
// dropped, never dereferenced: a question on a call's stream is refused as
// undeclared, a resource update is dropped. The pool's own reading of such
// a request crashed the gateway once (sessionpool's
// TestRequestWithoutParamsReachesTheCaller).
func TestRelayTakesRequestsWithoutParams(t *testing.T) {
	ctx := context.Background()
	r := &relay{inFlight: map[string][]*relayCall{}}
	up := sessionpool.Target{URL: "http://127.0.0.1:1/mcp"}
	callCtx, end := r.begin(ctx, ctx, up.Identity(), "inv", "ping", false)
	defer end()
	asked := sessionpool.WithCall(ctx, sessionpool.CallOf(callCtx))
	_, err := r.Handle(asked, up, "elicitation/create", &mcp.ElicitRequest{})
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) || jerr.Message != relayNotDeclared {
		t.Fatalf("elicitation/create without params: %v, want the refusal %q", err, relayNotDeclared)
	}
	if res, err := r.Handle(asked, up, "notifications/resources/updated", &mcp.ResourceUpdatedNotificationRequest{}); res != nil || err != nil {
		t.Fatalf("resources/updated without params: %v %v", res, err)
	}
	if _, err := r.Handle(asked, up, "sampling/createMessage", &mcp.CreateMessageWithToolsRequest{}); !errors.As(err, &jerr) {
		t.Fatalf("sampling/createMessage without params: %v, want a refusal", err)
	}
}
