package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
)

// progressLog records the progress notifications a client received.
type progressLog struct {
	mu  sync.Mutex
	got []*mcp.ProgressNotificationParams
}

func (p *progressLog) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, req.Params)
}

// wait returns the notifications once there are n, or after 5 s.
func (p *progressLog) wait(n int) []*mcp.ProgressNotificationParams {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got := p.all(); len(got) >= n {
			return got
		}
	}
	return p.all()
}

func (p *progressLog) all() []*mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), p.got...)
}

// TestGatewayRelaysProgress: an upstream's progress reaches the calling
// client under the client's own token, every time, including the first
// call on a new upstream session (the gateway's upstream session used to
// be opened under the first call's request context, and the relay sent
// under the upstream connection's context: the stateless endpoint could
// route neither to the call's stream, and they were lost), at 2026-07-28
// (stateless) and at 2025-11-25 (a session); a client that gave no token
// gets none, and one client never gets another's.
func TestGatewayRelaysProgress(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	for i, v := range []string{"2026-07-28", "2025-11-25", "2026-07-28", "2025-11-25"} {
		var log, other progressLog
		cs := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{ProgressNotificationHandler: log.handle}, v)
		bystander := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{ProgressNotificationHandler: other.handle}, v)
		if _, err := bystander.ListTools(ctxFor(t), nil); err != nil {
			t.Fatal(err)
		}
		token := fmt.Sprintf("client-token-%d", i)
		params := &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}}
		params.SetProgressToken(token)
		res, err := cs.CallTool(ctxFor(t), params)
		if err != nil || res.IsError {
			t.Fatalf("%s call %d: %v %q", v, i, err, text(res))
		}
		// The client SDK hands a notification to its handler goroutine and
		// the answer to the caller at once: wait for the handler.
		got := log.wait(gatewayworld.PingProgress)
		if len(got) != gatewayworld.PingProgress {
			t.Fatalf("%s call %d (first on its upstream session: %v): %d progress notifications, want %d", v, i, i == 0, len(got), gatewayworld.PingProgress)
		}
		for j, p := range got {
			if p.ProgressToken != token || p.Progress != float64(j+1) || p.Message != fmt.Sprintf("step %d", j+1) {
				t.Fatalf("%s notification %d: %+v", v, j, p)
			}
		}
		if res, err := cs.CallTool(ctxFor(t), &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err != nil || res.IsError || len(log.all()) != gatewayworld.PingProgress {
			t.Fatalf("%s: a call without a progress token: %v, %d notifications", v, err, len(log.all()))
		}
		if n := len(other.all()); n != 0 {
			t.Fatalf("%s: another client got %d notifications", v, n)
		}
	}
}

// relayClient is a 2025-11-25 client of the gateway recording what the
// gateway relays to it.
type relayClient struct {
	mu      sync.Mutex
	asked   []string
	logs    []*mcp.LoggingMessageParams
	block   bool          // its elicitation handler waits for its context to end
	blocked chan struct{} // closed when a blocked handler's context ended
}

func (c *relayClient) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	c.mu.Lock()
	c.asked = append(c.asked, req.Params.Message)
	c.mu.Unlock()
	if c.block {
		select {
		case <-ctx.Done():
			close(c.blocked)
			return nil, ctx.Err()
		case <-time.After(10 * time.Second): // never withdrawn
			return &mcp.ElicitResult{Action: "cancel"}, nil
		}
	}
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"dock": "D7"}}, nil
}

func (c *relayClient) log(_ context.Context, req *mcp.LoggingMessageRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logs = append(c.logs, req.Params)
}

func (c *relayClient) snapshot() ([]string, []*mcp.LoggingMessageParams) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.asked), slices.Clone(c.logs)
}

// labelled counts the log messages with data that name ping's server and
// tool as their origin.
func labelled(logs []*mcp.LoggingMessageParams, data string) int {
	n := 0
	for _, l := range logs {
		if l.Data == data && strings.Contains(l.Logger, "server "+gatewayworld.ServerID+", tool ping") {
			n++
		}
	}
	return n
}

// pingsPast reports whether the upstream has run more than before pings
// within the given time (a call that was in flight has ended).
func pingsPast(w *gatewayworld.World, before int, within time.Duration) bool {
	for deadline := time.Now().Add(within); len(callsOf(w, "ping")) == before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// lastPing is what the upstream's last ping got from its client.
func lastPing(t *testing.T, w *gatewayworld.World) map[string]any {
	t.Helper()
	pings := callsOf(w, "ping")
	if len(pings) == 0 {
		t.Fatal("the upstream ran no ping")
	}
	return pings[len(pings)-1].Args
}

// TestGatewayRelaysToSession: in front of a go-sdk server with its
// default, stateful handler, a 2025-11-25 client's call reaches the
// upstream over the client's own upstream session, which declares the
// client's capabilities: the upstream's elicitation/create reaches the
// client shown as from its server and tool and the answer goes back; its
// roots/list gets the client's roots; its log messages arrive at the level
// the client set (info: not debug), on the call's stream, the last one
// (sent just before the answer) too; its sampling request is refused. A
// client that declared nothing is asked nothing and gets no log messages
// before it sets a level. The upstream dropping its sessions costs no
// call (the gateway initializes anew). A client cancelling its call ends
// the upstream's call at once, though the upstream's question to it is
// open.
func TestGatewayRelaysToSession(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{StatefulUpstream: true})
	alice := w.Token(t, "alice", gatewayworld.TenantA)

	rc := &relayClient{}
	opts := &mcp.ClientOptions{ElicitationHandler: rc.elicit, LoggingMessageHandler: rc.log}
	client := mcp.NewClient(&mcp.Implementation{Name: "relay-test", Version: "1"}, opts)
	client.AddRoots(&mcp.Root{URI: "file:///work/alice", Name: "work"})
	cs, err := client.Connect(ctxFor(t), &mcp.StreamableClientTransport{Endpoint: w.GatewayURL, HTTPClient: gatewayworld.HTTPClient(alice), DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(ctxFor(t), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		if round == 1 {
			w.DropUpstreamSessions()
		}
		if res := call(t, cs, "ping", nil); res.IsError || text(res) != "pong" {
			t.Fatalf("round %d: ping: %q", round, text(res))
		}
		got := lastPing(t, w)
		if got["elicit"] != "accept D7" || got["roots"] != "file:///work/alice" || got["sampling"] != "refused" {
			t.Fatalf("round %d: the upstream got %v", round, got)
		}
		// The client SDK hands notifications to a goroutine of their own.
		var asked []string
		var logs []*mcp.LoggingMessageParams
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if asked, logs = rc.snapshot(); labelled(logs, gatewayworld.PingDone) >= round+1 {
				break
			}
		}
		// ping logs PingDone just before it answers: it comes on the
		// call's stream (this client holds no standalone stream), named
		// as from the server and tool.
		if n := labelled(logs, gatewayworld.PingDone); n != round+1 {
			t.Fatalf("round %d: %d of ping's last log messages reached the client on the call's stream, want %d: %+v", round, n, round+1, logs)
		}
		if len(asked) != round+1 || !strings.Contains(asked[round], gatewayworld.PingQuestion) ||
			!strings.Contains(asked[round], "server "+gatewayworld.ServerID) || !strings.Contains(asked[round], "tool ping") {
			t.Fatalf("round %d: asked %q", round, asked)
		}
		var infos int
		for _, l := range logs {
			if l.Data == gatewayworld.PingDebug || l.Level == "debug" {
				t.Fatalf("round %d: a debug message under level info: %+v", round, l)
			}
			if l.Data == gatewayworld.PingInfo && strings.Contains(l.Logger, "server "+gatewayworld.ServerID) && strings.Contains(l.Logger, "tool ping") {
				infos++
			}
		}
		if infos != round+1 {
			t.Fatalf("round %d: %d info messages of ping in %+v", round, infos, logs)
		}
	}

	// A client that declared nothing: the upstream sees no elicitation or
	// roots capability, and no message reaches it without a level.
	bare := &relayClient{}
	bs := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{LoggingMessageHandler: bare.log, Capabilities: &mcp.ClientCapabilities{}}, "2025-11-25")
	if res := call(t, bs, "ping", nil); res.IsError {
		t.Fatalf("bare ping: %q", text(res))
	}
	if got := lastPing(t, w); got["elicit"] != nil || got["roots"] != nil || got["sampling"] != "refused" {
		t.Fatalf("a client that declared nothing: the upstream got %v", got)
	}
	if asked, logs := bare.snapshot(); len(asked) != 0 || len(logs) != 0 {
		t.Fatalf("a client that declared nothing was asked %q and sent %d log messages", asked, len(logs))
	}
	if asked, _ := rc.snapshot(); len(asked) != 2 {
		t.Fatalf("another client's call asked alice's first client: %q", asked)
	}

	// Cancellation: the client gives up while the upstream's question is
	// open; the upstream's call and the relayed question both end.
	blocker := &relayClient{block: true, blocked: make(chan struct{})}
	ks, err := mcp.NewClient(&mcp.Implementation{Name: "blocker", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: blocker.elicit}).Connect(ctxFor(t),
		&mcp.StreamableClientTransport{Endpoint: w.GatewayURL, HTTPClient: gatewayworld.HTTPClient(alice)}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	cctx, cancel := context.WithCancel(ctxFor(t))
	errc := make(chan error, 1)
	before := len(callsOf(w, "ping"))
	go func() {
		_, err := ks.CallTool(cctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
		errc <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if asked, _ := blocker.snapshot(); len(asked) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the blocked client was never asked")
		}
	}
	cancel()
	cancelledAt := time.Now()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	// MCP's cancellation is a best-effort notification on both hops
	// (client → gateway, gateway → upstream), each sent off the caller's
	// path with a 5 s bound in the go-sdk. Issue 23: the gateway closed its
	// upstream session as soon as the cancelled call returned, and the SDK
	// then refused to send the notification and the relayed question's
	// answer; about one run in four under -race and load, the upstream's
	// call ran on for good (sessionpool's TestCancelledCallEndsTheUpstreamCall).
	// What the gateway guarantees beyond the notification: when the client
	// ends its session, the call it left open ends too
	// (TestGatewayEndsTheCallsOfASessionItsClientEnds). So the call must
	// end within 30 s of the cancel, or else within 30 s of the client
	// closing its session (logged: the notification was lost).
	ended := func(within time.Duration) bool { return pingsPast(w, before, within) }
	if !ended(30 * time.Second) {
		t.Logf("the upstream's call did not end within 30 s of the client's cancel at %s (notifications/cancelled lost); closing the client's session",
			cancelledAt.Format(time.RFC3339Nano))
		_ = ks.Close()
		if !ended(30 * time.Second) {
			t.Fatal("the upstream's call did not end within 30 s of the client's cancel nor within 30 s of the client closing its session")
		}
	}
	// The upstream's question ended without the client's answer (the
	// gateway answers it with an error as the call ends, or its own call is
	// cancelled first); the blocked client never answers.
	if got := lastPing(t, w); got["elicit"] != "cancelled" && got["elicit"] != "error" {
		t.Fatalf("the upstream's question after the client cancelled: %v", got)
	}
	// (No bound on how soon: the blocked client never answers, so the call
	// ending at all is the cancellation reaching the upstream; a time bound
	// here would be a timed test.)
}

// TestGatewayRelaysResourceUpdates: a 2025-11-25 client subscribes to an
// upstream resource through the gateway (resources/subscribe reaches the
// server over the client's own upstream session); the server's
// notifications/resources/updated reaches it, and not a client of the
// same principal that did not subscribe, and reaches a subscriber once
// although two sessions of the principal subscribed; after
// resources/unsubscribe no more.
func TestGatewayRelaysResourceUpdates(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{StatefulUpstream: true})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	var mu sync.Mutex
	got := map[string]int{}
	handler := func(name string) func(context.Context, *mcp.ResourceUpdatedNotificationRequest) {
		return func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			mu.Lock()
			defer mu.Unlock()
			if req.Params.URI == gatewayworld.ResourceURI {
				got[name]++
			}
		}
	}
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return got[name]
	}
	sub := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{ResourceUpdatedHandler: handler("subscriber")}, "2025-11-25")
	other := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{ResourceUpdatedHandler: handler("other")}, "2025-11-25")
	if _, err := other.ListResources(ctxFor(t), nil); err != nil {
		t.Fatal(err)
	}
	if err := sub.Subscribe(ctxFor(t), &mcp.SubscribeParams{URI: gatewayworld.ResourceURI}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	// The update reaches a subscriber on its standalone stream, which sub
	// does not open; live does, and subscribes too: the one change
	// reaches it once, although two sessions of alice subscribed.
	lc, err := mcp.NewClient(&mcp.Implementation{Name: "live", Version: "1"}, &mcp.ClientOptions{ResourceUpdatedHandler: handler("live")}).Connect(ctxFor(t),
		&mcp.StreamableClientTransport{Endpoint: w.GatewayURL, HTTPClient: gatewayworld.HTTPClient(alice)}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	if err := lc.Subscribe(ctxFor(t), &mcp.SubscribeParams{URI: gatewayworld.ResourceURI}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := w.UpdateResource(ctxFor(t), gatewayworld.ResourceURI); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); count("live") == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the subscriber got no update")
		}
	}
	if err := lc.Unsubscribe(ctxFor(t), &mcp.UnsubscribeParams{URI: gatewayworld.ResourceURI}); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
	if err := w.UpdateResource(ctxFor(t), gatewayworld.ResourceURI); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := count("live"); n != 1 {
		t.Fatalf("%d updates, want 1 (none after unsubscribe)", n)
	}
	if n := count("other"); n != 0 {
		t.Fatalf("a client that did not subscribe got %d updates", n)
	}
}

// TestGatewayRelaysStatelessCallLogs: a 2026-07-28 client (stateless, no
// session) whose tools/call names a log level in _meta
// (io.modelcontextprotocol/logLevel) gets the upstream's log messages of
// that call at that level or above on the call's own response stream,
// named as from the server and tool, in the upstream's order, the last one
// (sent just before the answer) too; a call that names no level gets none
// (the upstream is asked for none). Before, no log message of a stateless
// call was relayed. The same in front of a stateful go-sdk upstream, which
// speaks 2025-11-25 and sends a session no log message until
// logging/setLevel (a request cannot name its level there): before, such
// a caller got none from it.
func TestGatewayRelaysStatelessCallLogs(t *testing.T) {
	for _, stateful := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateless upstream", true: "stateful upstream"}[stateful], func(t *testing.T) {
			statelessCallLogs(t, stateful)
		})
	}
}

func statelessCallLogs(t *testing.T, stateful bool) {
	w := gatewayworld.Start(t, gatewayworld.Options{StatefulUpstream: stateful})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	var rc relayClient
	cs := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{LoggingMessageHandler: rc.log}, "2026-07-28")
	if res := call(t, cs, "ping", nil); res.IsError || text(res) != "pong" {
		t.Fatalf("ping without a level: %q", text(res))
	}
	params := &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}, Meta: mcp.Meta{mcp.MetaKeyLogLevel: "info"}}
	if res, err := cs.CallTool(ctxFor(t), params); err != nil || res.IsError {
		t.Fatalf("ping at level info: %v %q", err, text(res))
	}
	// The client SDK hands notifications to a goroutine of its own, in
	// the order they came: the first call's, had there been any, first.
	var logs []*mcp.LoggingMessageParams
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, logs = rc.snapshot(); len(logs) >= 2 {
			break
		}
	}
	var got []string
	for _, l := range logs {
		got = append(got, fmt.Sprint(l.Data))
		if !strings.Contains(l.Logger, "server "+gatewayworld.ServerID+", tool ping") || l.Level != "info" {
			t.Fatalf("a relayed message not named as from ping's server and tool, or not at info: %+v", l)
		}
	}
	if want := []string{gatewayworld.PingInfo, gatewayworld.PingDone}; !slices.Equal(got, want) {
		t.Fatalf("log messages %q, want %q (the call without a level gets none, debug is below info)", got, want)
	}
}

// TestGatewayEndsTheQuestionTheUpstreamWithdraws: cancellation from the
// upstream's side. A stateful upstream's ping asks its client a question
// and withdraws it 300 ms later (notifications/cancelled for its
// elicitation/create); the gateway ends the question it relayed: the
// client's handler sees its request cancelled (long before the 30 s it
// would otherwise wait), and the call goes on and is answered.
func TestGatewayEndsTheQuestionTheUpstreamWithdraws(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{StatefulUpstream: true, PingWithdraw: 300 * time.Millisecond})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	ended := make(chan bool, 1)
	elicit := func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		select {
		case <-ctx.Done():
			ended <- true
			return nil, ctx.Err()
		case <-time.After(30 * time.Second):
			ended <- false
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
	}
	cs := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{ElicitationHandler: elicit}, "2025-11-25")
	if res := call(t, cs, "ping", nil); res.IsError || text(res) != "pong" {
		t.Fatalf("ping: %q", text(res))
	}
	if !<-ended {
		t.Fatal("the client's question was not ended when the upstream withdrew it")
	}
	if got := lastPing(t, w); got["elicit"] != "error" {
		t.Fatalf("the upstream's withdrawn question: %v, want error (its own context ended)", got["elicit"])
	}
}
