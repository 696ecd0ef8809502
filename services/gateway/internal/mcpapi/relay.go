package mcpapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/services/gateway/internal/sessionpool"
)

// Reasons an upstream's request to the client is refused with (JSON-RPC
// errors to the upstream, never shown to the client).
const (
	// relayNoCall: the upstream asked the client outside any call the
	// client made to it (the gateway relays requests only within one).
	relayNoCall = "the gateway relays a request to the client only during a call the client made to this server"
	// relaySamplingRefused: the tool's reviewed contract does not allow
	// sampling through the gateway (allow_sampling unset, or the contract
	// setting it not approved at the called digest).
	relaySamplingRefused = "sampling/createMessage is not allowed through the gateway for this tool"
	// relaySamplingTools: the upstream offered tools in a sampling request
	// to a client that did not declare sampling with tools.
	relaySamplingTools = "the client did not declare sampling with tools"
	// relayNotDeclared: the client did not declare the capability.
	relayNotDeclared = "the client did not declare this capability"
)

// relay is one client session of the gateway as the callee of what
// upstreams send back during its calls (a [sessionpool.Caller]). It exists
// for sessions (2025-06-18 / 2025-11-25 clients with Mcp-Session-Id): the
// stateless endpoint has no way to carry a request to its client.
type relay struct {
	g    *Gateway
	st   *state
	ss   *mcp.ServerSession
	key  string
	done chan struct{}

	mu       sync.Mutex
	inFlight map[string][]*relayCall // by target identity, oldest first
	watched  map[string]string       // target identity \x00 upstream URI -> the URI as the client knows it
}

// MetaRelayedFrom is the `_meta` key of a sampling/createMessage the
// gateway relays to its client: {"server": <server id>, "tool": <the
// tool's name as the client knows it>}, the call the upstream asked
// during. The gateway sets it (an upstream's own value is replaced).
const MetaRelayedFrom = "dev.toolcrib/relayed-from"

// maxWatched bounds one session's resource subscriptions.
const maxWatched = 1024

// watch records a subscription of the client to listed, the upstream's
// uri on target.
func (r *relay) watch(target, uri, listed string) {
	r.mu.Lock()
	if len(r.watched) >= maxWatched {
		r.mu.Unlock()
		return
	}
	r.watched[target+"\x00"+uri] = listed
	r.mu.Unlock()
	r.st.mu.Lock()
	if !slices.Contains(r.st.watchers[listed], r) {
		r.st.watchers[listed] = append(r.st.watchers[listed], r)
	}
	r.st.mu.Unlock()
}

func (r *relay) unwatch(target, uri string) {
	r.mu.Lock()
	listed, ok := r.watched[target+"\x00"+uri]
	delete(r.watched, target+"\x00"+uri)
	r.mu.Unlock()
	if ok {
		r.st.unwatch(listed, r)
	}
}

// unwatch removes r from the watchers of listed.
func (st *state) unwatch(listed string, r *relay) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.watchers[listed] = slices.DeleteFunc(st.watchers[listed], func(x *relay) bool { return x == r })
	if len(st.watchers[listed]) == 0 {
		delete(st.watchers, listed)
	}
}

// forwards reports whether r is the one relay of its principal that
// passes on updates of listed: every session subscribed to it has its own
// upstream subscription, so the server announces one change once per
// session, and the SDK sends each announcement to every subscribed
// session of the principal; one relay passing them on keeps it to one.
func (r *relay) forwards(listed string) bool {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	w := r.st.watchers[listed]
	return len(w) > 0 && w[0] == r
}

// watchedAs is the URI the client subscribed to for the upstream's uri on
// target, if it did.
func (r *relay) watchedAs(target, uri string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	listed, ok := r.watched[target+"\x00"+uri]
	return listed, ok
}

// relayCall is one call in flight on a caller's upstream session.
type relayCall struct {
	ctx      context.Context // the client's tools/call request
	serverID string
	tool     string // the tool's name as the client knows it
	// sampling: the tool's contract, approved at the called digest, allows
	// the upstream to ask the client for a sampling.
	sampling bool
}

// relayOf returns ss's relay, made on first use; nil for a session that
// cannot be relayed to (the stateless endpoint's).
func (g *Gateway) relayOf(st *state, ss *mcp.ServerSession) *relay {
	if ss == nil || ss.ID() == "" {
		return nil
	}
	g.relayMu.Lock()
	defer g.relayMu.Unlock()
	if r := g.relays[ss]; r != nil {
		return r
	}
	r := &relay{g: g, st: st, ss: ss, key: "session:" + ss.ID(), done: make(chan struct{}), inFlight: map[string][]*relayCall{}, watched: map[string]string{}}
	g.relays[ss] = r
	go func() {
		_ = ss.Wait()
		close(r.done)
		r.mu.Lock()
		listed := slices.Collect(maps.Values(r.watched))
		r.mu.Unlock()
		for _, l := range listed {
			st.unwatch(l, r)
		}
		g.relayMu.Lock()
		delete(g.relays, ss)
		g.relayMu.Unlock()
	}()
	return r
}

func (r *relay) Key() string           { return r.key }
func (r *relay) Done() <-chan struct{} { return r.done }

// Capabilities are the client's elicitation, sampling and roots
// capabilities, as it declared them at initialize. Sampling is declared
// for the whole upstream session (one per client session and server), and
// relayed only during calls of tools whose contract allows it ([relay.Handle]).
func (r *relay) Capabilities() *mcp.ClientCapabilities {
	ip := r.ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil {
		return nil
	}
	c := ip.Capabilities
	out := &mcp.ClientCapabilities{Elicitation: c.Elicitation, Sampling: c.Sampling}
	if c.RootsV2 != nil {
		out.RootsV2 = c.RootsV2
	} else if c.Roots.ListChanged {
		out.RootsV2 = &mcp.RootCapabilities{ListChanged: true}
	}
	return out
}

// begin records a call in flight to target; the returned func ends it.
// sampling is whether the tool's approved contract allows the upstream to
// ask the client for a sampling during the call.
func (r *relay) begin(ctx context.Context, target, serverID, tool string, sampling bool) func() {
	c := &relayCall{ctx: ctx, serverID: serverID, tool: tool, sampling: sampling}
	r.mu.Lock()
	r.inFlight[target] = append(r.inFlight[target], c)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		list := r.inFlight[target]
		for i, x := range list {
			if x == c {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(r.inFlight, target)
		} else {
			r.inFlight[target] = list
		}
	}
}

// current is the newest call in flight to target, or nil.
func (r *relay) current(target string) *relayCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.inFlight[target]
	if len(list) == 0 {
		return nil
	}
	return list[len(list)-1]
}

// Handle answers what the upstream at t sends the client: requests only
// within a call in flight (sent on that call's response stream, shown as
// from its server and tool, and ended when either the client's call or the
// upstream's request ends); log messages and resource updates on the
// call's stream, else the session's standalone stream.
func (r *relay) Handle(ctx context.Context, t sessionpool.Target, method string, req mcp.Request) (mcp.Result, error) {
	call := r.current(t.Identity())
	switch method {
	case "notifications/message":
		p, ok := req.GetParams().(*mcp.LoggingMessageParams)
		if !ok || p == nil {
			return nil, nil
		}
		out := *p
		out.Logger = bounded(r.origin(call, p.Logger), 256)
		_ = r.ss.Log(r.notifyCtx(call), &out)
		return nil, nil
	case "notifications/resources/updated":
		// Only for a resource this client subscribed to, under the URI it
		// knows; the SDK sends it to the principal's sessions subscribed
		// to that URI.
		if p, ok := req.GetParams().(*mcp.ResourceUpdatedNotificationParams); ok && p != nil {
			if listed, ok := r.watchedAs(t.Identity(), p.URI); ok && r.forwards(listed) {
				_ = r.st.server.ResourceUpdated(r.notifyCtx(call), &mcp.ResourceUpdatedNotificationParams{URI: listed})
			}
		}
		return nil, nil
	case "notifications/elicitation/complete":
		return nil, nil
	}
	if call == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: relayNoCall}
	}
	// The request ends when the client's call ends or the upstream
	// withdraws it (notifications/cancelled cancels ctx).
	cctx, cancel := context.WithCancel(call.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	switch method {
	case "elicitation/create":
		p, ok := req.GetParams().(*mcp.ElicitParams)
		if !ok || p == nil || !canElicit(r.ss) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: relayNotDeclared}
		}
		out := *p
		out.Message = fmt.Sprintf("[%s] %s", r.origin(call, ""), bounded(p.Message, 4096))
		res, err := r.ss.Elicit(cctx, &out)
		if err != nil {
			return nil, relayErr(err)
		}
		return res, nil
	case "roots/list":
		if c := r.Capabilities(); c == nil || c.RootsV2 == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: relayNotDeclared}
		}
		res, err := r.ss.ListRoots(cctx, &mcp.ListRootsParams{})
		if err != nil {
			return nil, relayErr(err)
		}
		return res, nil
	case "sampling/createMessage":
		return r.sample(cctx, call, req)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not relayed"}
}

// sample relays an upstream's sampling/createMessage during call to the
// client: only when the tool's approved contract allows it and the client
// declared sampling (with tools, if the request offers tools). The request
// goes as the upstream sent it but for two changes: includeContext is
// dropped (a client honouring "thisServer" or "allServers" would put what
// it has from the gateway's other servers and tools into a completion this
// upstream reads; MCP lets a client ignore the field), and `_meta` names
// the server and tool it comes from ([MetaRelayedFrom]).
func (r *relay) sample(ctx context.Context, call *relayCall, req mcp.Request) (mcp.Result, error) {
	if !call.sampling {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: relaySamplingRefused}
	}
	var declared *mcp.SamplingCapabilities
	if ip := r.ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
		declared = ip.Capabilities.Sampling
	}
	p, ok := req.GetParams().(*mcp.CreateMessageWithToolsParams)
	if !ok || p == nil || declared == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: relayNotDeclared}
	}
	if (len(p.Tools) > 0 || p.ToolChoice != nil) && declared.Tools == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: relaySamplingTools}
	}
	out := *p
	out.IncludeContext = ""
	out.Meta = mcp.Meta{}
	for k, v := range p.Meta {
		if k != "progressToken" && k != MetaRelayedFrom {
			out.Meta[k] = v
		}
	}
	out.Meta[MetaRelayedFrom] = map[string]string{"server": call.serverID, "tool": call.tool}
	res, err := r.ss.CreateMessageWithTools(ctx, &out)
	if err != nil {
		return nil, relayErr(err)
	}
	return res, nil
}

// origin names where a relayed message comes from: the server and the
// tool of the call in flight (and the upstream's logger name, if any).
func (r *relay) origin(call *relayCall, logger string) string {
	s := "upstream"
	if call != nil {
		s = "server " + call.serverID + ", tool " + call.tool
	}
	if logger != "" {
		s += ": " + logger
	}
	return s
}

// notifyCtx is the context a notification is sent under: the call's (its
// response stream) while one is in flight, else the session's standalone
// stream.
func (r *relay) notifyCtx(call *relayCall) context.Context {
	if call != nil && call.ctx.Err() == nil {
		return call.ctx
	}
	return context.Background()
}

// relayErr passes on a client's JSON-RPC error, and any other failure as
// an internal error without its text.
func relayErr(err error) error {
	if err == nil {
		return nil
	}
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return &jsonrpc.Error{Code: werr.Code, Message: bounded(werr.Message, 512)}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the client's call ended"}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the client did not answer"}
}
