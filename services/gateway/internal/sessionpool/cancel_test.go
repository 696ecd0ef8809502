package sessionpool

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/platform/egress"
)

// askingServer serves, with sessions, a tool "ask" that asks its client a
// question (elicitation/create) and sends how that ended on ended:
// "cancelled" (its own call was cancelled), "error" (the client answered
// with an error) or "answered"; at the test's end a question still open is
// given up ("abandoned"), so that a failed test ends.
func askingServer(t *testing.T, ended chan<- string) string {
	testEnded, endTest := context.WithCancel(context.Background())
	server := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			qctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(testEnded, cancel)()
			_, err := req.Session.Elicit(qctx, &mcp.ElicitParams{Message: "Which dock?", RequestedSchema: map[string]any{"type": "object",
				"properties": map[string]any{"dock": map[string]any{"type": "string"}}}})
			outcome := "answered"
			switch {
			case err != nil && ctx.Err() != nil:
				outcome = "cancelled"
			case err != nil && testEnded.Err() != nil:
				outcome = "abandoned"
			case err != nil:
				outcome = "error"
			}
			ended <- outcome
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: outcome}}}, nil
		})
	server.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo"}}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	t.Cleanup(endTest) // before srv.Close, which waits for the handlers
	return srv.URL
}

// dropCancels passes requests to base, but for POSTs that carry a
// notifications/cancelled when drop is set: those are answered 202 here
// and never reach the server (a notification lost on the way).
type dropCancels struct {
	base    http.RoundTripper
	drop    bool
	dropped atomic.Int32
}

func (d *dropCancels) RoundTrip(r *http.Request) (*http.Response, error) {
	if !d.drop || r.Method != http.MethodPost || r.Body == nil {
		return d.base.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	if bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
		d.dropped.Add(1)
		return &http.Response{StatusCode: http.StatusAccepted, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	return d.base.RoundTrip(r)
}

// relayingCaller answers the upstream's elicitation/create as the
// gateway's relay does when its client gives up: with an error once the
// client's call (callCtx) has ended. It answers only after the pool's call
// has returned (returned is closed), or 2 s after the call ended: the
// relay's answer and the pool's handling of the cancelled call race, and
// this makes the answer the later of the two every time. Without answer it
// does not answer until quit is closed (nor does the upstream withdrawing
// its question reach it: that goes on the call's stream, which the
// cancelled call closed).
type relayingCaller struct {
	fakeCaller
	callCtx  context.Context
	returned chan struct{}
	answer   bool
	quit     chan struct{}
	asked    atomic.Bool // the upstream's question reached the caller
}

func (c *relayingCaller) Handle(ctx context.Context, t Target, method string, req mcp.Request) (mcp.Result, error) {
	if method != "elicitation/create" {
		return c.fakeCaller.Handle(ctx, t, method, req)
	}
	c.asked.Store(true)
	if c.answer {
		select {
		case <-c.callCtx.Done():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-c.returned:
		case <-time.After(2 * time.Second):
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the client's call ended"}
	}
	select {
	case <-ctx.Done():
	case <-c.quit:
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the client's call ended"}
}

// TestCancelledCallEndsTheUpstreamCall (issue 23): a call on a caller's
// own session is cancelled while the upstream's question to the caller is
// open; the upstream's call ends, and the session stays (the same one
// serves the next call). When the SDK's notifications/cancelled is lost on
// the way, the caller's answer to the question ends it; when the caller
// does not answer, the notification does. Before, the pool closed the session
// as soon as the cancelled call returned: the SDK then refused to send the
// notification and the answer (the session was closing), the upstream's
// call waited for good, and so did the session's DELETE.
func TestCancelledCallEndsTheUpstreamCall(t *testing.T) {
	for _, c := range []struct {
		name   string
		drop   bool // notifications/cancelled is lost
		answer bool // the caller answers the question when the call ends
		want   string
	}{
		{"the notification is lost, the caller answers", true, true, "error"},
		{"the notification arrives, the caller does not answer", false, false, "cancelled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ended := make(chan string, 8)
			url := askingServer(t, ended)
			p := New(egress.Policy{AllowLoopback: true}, nil, nil)
			defer p.Close()
			tr := &dropCancels{base: p.http.Transport, drop: c.drop}
			p.http.Transport = tr
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			callCtx, cancelCall := context.WithCancel(ctx)
			caller := &relayingCaller{
				fakeCaller: fakeCaller{key: "session:a", done: make(chan struct{}),
					caps: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}},
				callCtx: callCtx, returned: make(chan struct{}), answer: c.answer, quit: make(chan struct{}),
			}
			defer close(caller.done)
			defer close(caller.quit)
			target := Target{URL: url}
			before, err := p.SessionFor(ctx, target, caller)
			if err != nil {
				t.Fatal(err)
			}

			errc := make(chan error, 1)
			go func() {
				_, err := p.CallFor(callCtx, target, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}}, caller)
				close(caller.returned)
				errc <- err
			}()
			for deadline := time.Now().Add(10 * time.Second); !caller.asked.Load(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the upstream's question never reached the caller")
				}
			}
			cancelCall()
			select {
			case err := <-errc:
				if err == nil {
					t.Fatal("the cancelled call returned no error")
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the cancelled call did not return within 15 s")
			}
			select {
			case got := <-ended:
				if got != c.want {
					t.Fatalf("the upstream's question ended %q, want %q", got, c.want)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the upstream's call did not end within 15 s of the cancel")
			}
			if c.drop && tr.dropped.Load() == 0 {
				t.Fatal("no notifications/cancelled was sent to be lost")
			}
			after, err := p.SessionFor(ctx, target, caller)
			if err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Fatal("the cancelled call cost the caller its upstream session")
			}
			if res, err := p.CallFor(ctx, target, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, caller); err != nil || res.IsError {
				t.Fatalf("the next call: %v %+v", err, res)
			}
		})
	}
}

// TestSessionEndingWhileItsSuccessorConnects: a caller's upstream session
// that ends while a new session under its key is being connected (the
// upstream dropped the old one, and the retried call connects anew) looks
// at the entry now under the key, the successor's, and leaves it. The
// successor's session was written into its entry outside the pool's lock,
// and the old session's watcher read it under the lock: a data race
// (-race failed TestGatewayRelaysToSession once in its round after
// DropUpstreamSessions).
func TestSessionEndingWhileItsSuccessorConnects(t *testing.T) {
	url := chattyServer(t, false, 0)
	p := New(egress.Policy{AllowLoopback: true}, nil, nil)
	defer p.Close()
	caller := &fakeCaller{key: "session:a", done: make(chan struct{})}
	defer close(caller.done)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	target := Target{URL: url}
	old, err := p.SessionFor(ctx, target, caller)
	if err != nil {
		t.Fatal(err)
	}
	k := keyOf(target)
	k.caller = caller.Key()
	p.mu.Lock()
	oldEntry := p.sessions[k]
	p.mu.Unlock()
	p.drop(k, oldEntry)

	release := make(chan struct{})
	successor := make(chan *mcp.ClientSession, 1)
	go func() {
		cs, err := p.sessionOn(ctx, k, func() (*mcp.ClientSession, error) {
			<-release
			return p.connectFor(target, caller)
		})
		if err != nil {
			t.Error(err)
		}
		successor <- cs
	}()
	for {
		p.mu.Lock()
		e := p.sessions[k]
		p.mu.Unlock()
		if e != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// The old session's watcher looks at the entry under k (the
	// successor's, still connecting) once the old session has ended.
	_ = old.Close()
	time.Sleep(200 * time.Millisecond)
	close(release)
	cs := <-successor
	p.mu.Lock()
	e := p.sessions[k]
	p.mu.Unlock()
	if cs == nil || e == nil || e.cs != cs {
		t.Fatal("the old session's end removed its successor")
	}
	if res, err := p.CallFor(ctx, target, &mcp.CallToolParams{Name: "chatty", Arguments: map[string]any{}}, caller); err != nil || res.IsError {
		t.Fatalf("a call on the successor: %v %+v", err, res)
	}
}
