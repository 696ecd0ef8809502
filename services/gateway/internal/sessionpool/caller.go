package sessionpool

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Caller is a client session of the gateway that an upstream may speak
// back to: what the upstream sends during a call made for it (elicitation,
// sampling, roots, log messages, resource updates) goes to Handle, never to
// another caller. A caller has its own upstream session per HTTP target
// ([Pool.CallFor]), which declares the caller's capabilities upstream.
type Caller interface {
	// Key names the caller's session on this gateway replica.
	Key() string
	// Capabilities are what the upstream session declares: the caller's
	// own elicitation, sampling and roots capabilities (nil: none); the
	// gateway decides which requests it relays.
	Capabilities() *mcp.ClientCapabilities
	// Done is closed when the caller's session ends; its upstream sessions
	// are closed then.
	Done() <-chan struct{}
	// Handle answers a request or notification the upstream at t sent on
	// the caller's upstream session (method names as in MCP). It is called
	// for every server-to-client message but progress (which goes to the
	// pool's onProgress, in order) and log messages (Log, or a call's sink).
	// A request the upstream asked on the stream of a call made under
	// [WithCall] comes with that call's id in ctx ([CallOf]); any other
	// request with none (every request of a stdio server, whose one pipe
	// tells no call from another).
	Handle(ctx context.Context, t Target, method string, req mcp.Request) (mcp.Result, error)
	// Log takes a log message the upstream at t sent on the caller's
	// upstream session outside a call that carries a log sink
	// ([WithLogSink]): on its standalone stream, or on the stream of a
	// request made without a sink. It is called on the stream's reading
	// goroutine, in the server's order; ctx is that request's context.
	Log(ctx context.Context, t Target, p *mcp.LoggingMessageParams)
}

// relayed are the server-to-client methods a caller's upstream session
// passes to [Caller.Handle].
var relayed = map[string]bool{
	"elicitation/create":                 true,
	"sampling/createMessage":             true,
	"roots/list":                         true,
	"notifications/resources/updated":    true,
	"notifications/elicitation/complete": true,
}

// CallFor calls a tool on caller's own session to t (without a caller,
// the shared session of [Pool.Call]). The session is opened on first use
// with the caller's capabilities (over HTTP with its standalone stream),
// asks the upstream to send every log message (the caller's level is
// applied by the gateway), and is closed when the caller's session ends.
// For a stdio server the caller's own session is a process of its own,
// started only for a caller that declared elicitation, sampling or roots
// (what the server may ask it); another caller shares one process
// ([Pool.Call]), which is asked nothing.
func (p *Pool) CallFor(ctx context.Context, t Target, params *mcp.CallToolParams, caller Caller) (*mcp.CallToolResult, error) {
	if caller == nil || (t.URL == "" && !asksBack(caller.Capabilities())) {
		return p.Call(ctx, t, params)
	}
	k := keyOf(t)
	k.caller = caller.Key()
	return p.callOn(ctx, k, t, params, func() (*mcp.ClientSession, error) { return p.connectFor(t, caller) })
}

// SessionFor returns caller's own session to t (see [Pool.CallFor]),
// opening it on first use.
func (p *Pool) SessionFor(ctx context.Context, t Target, caller Caller) (*mcp.ClientSession, error) {
	if caller == nil || t.URL == "" {
		return p.Session(ctx, t)
	}
	k := keyOf(t)
	k.caller = caller.Key()
	return p.sessionOn(ctx, k, func() (*mcp.ClientSession, error) { return p.connectFor(t, caller) })
}

// asksBack reports whether c declares something a server may ask its
// client for.
func asksBack(c *mcp.ClientCapabilities) bool {
	return c != nil && (c.Elicitation != nil || c.Sampling != nil || c.RootsV2 != nil || c.Roots.ListChanged)
}

func (p *Pool) connectFor(t Target, caller Caller) (*mcp.ClientSession, error) {
	select {
	case <-caller.Done():
		return nil, errors.New("upstream: the caller's session has ended")
	default:
	}
	caps := &mcp.ClientCapabilities{}
	if c := caller.Capabilities(); c != nil {
		caps.Elicitation = c.Elicitation
		caps.Sampling = c.Sampling
		if c.RootsV2 != nil || c.Roots.ListChanged {
			caps.RootsV2 = &mcp.RootCapabilities{}
		}
	}
	opts := &mcp.ClientOptions{Logger: p.logger, Capabilities: caps}
	if t.URL == "" {
		// A stdio server's progress and log messages come on its one
		// pipe, not through the tap.
		opts.ProgressNotificationHandler = progressHandler(p.onProgress)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolcrib-gateway", Version: "1.0.0"}, opts)
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if relayed[method] {
				// The call that asked, as the tap marked it on the
				// call's stream ([MetaCall]); the mark goes no further.
				if meta := metaOf(req); meta != nil {
					if id, ok := meta[MetaCall].(string); ok {
						ctx = WithCall(ctx, id)
					}
					delete(meta, MetaCall)
				}
				return caller.Handle(ctx, t, method, req)
			}
			if method == "notifications/message" {
				// Over HTTP the tap handed it on as it was read ([sseTap]),
				// on the call's stream when it came on one; a stdio
				// server's has no stream to tell its call by.
				if lr, ok := req.(*mcp.LoggingMessageRequest); ok && t.URL == "" && lr.Params != nil {
					caller.Log(ctx, t, lr.Params)
				}
				return nil, nil
			}
			return next(ctx, method, req)
		}
	})
	cs, err := p.connectWith(client, t, true, func(ctx context.Context, p *mcp.LoggingMessageParams) { caller.Log(ctx, t, p) })
	if err != nil {
		return nil, err
	}
	if r := cs.InitializeResult(); r != nil && r.Capabilities != nil && r.Capabilities.Logging != nil {
		// The gateway filters by each caller's level; the upstream sends
		// everything (a go-sdk server sends nothing until a level is set).
		lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := cs.SetLoggingLevel(lctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			p.logger.Debug("upstream refused logging/setLevel", "error", err)
		}
		cancel()
	}
	k := keyOf(t)
	k.caller = caller.Key()
	go func() {
		select {
		case <-caller.Done():
		case <-closed(cs):
		}
		p.mu.Lock()
		if e := p.sessions[k]; e != nil && e.cs == cs {
			delete(p.sessions, k)
		}
		p.mu.Unlock()
		_ = cs.Close()
	}()
	return cs, nil
}

// metaOf is the `_meta` of req's params, nil when it has none. A request
// may come without params (roots/list usually does: server-everything asks
// so 350 ms after its session starts); the go-sdk then holds a nil pointer
// of the method's params type in the [mcp.Params] interface, which is not
// == nil and whose GetMeta dereferences it. Before, that request from any
// upstream crashed the gateway.
func metaOf(req mcp.Request) map[string]any {
	params := req.GetParams()
	if params == nil {
		return nil
	}
	if v := reflect.ValueOf(params); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return params.GetMeta()
}

// closed is closed when cs ends.
func closed(cs *mcp.ClientSession) <-chan struct{} {
	ch := make(chan struct{})
	go func() { _ = cs.Wait(); close(ch) }()
	return ch
}
