package mcpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/services/gateway/internal/bearer"
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
	// relayStdioAmbiguous: a stdio server asked while the session had more
	// than one call in flight to it (its pipe does not say which asked).
	relayStdioAmbiguous = "the gateway relays a stdio server's request only while one call of the session is in flight to it; it cannot tell which of several asked"
	// relayNotDeclared: the client did not declare the capability.
	relayNotDeclared = "the client did not declare this capability"
	// relaySamplingMaxTokens: the request's maxTokens is over the gateway's
	// --sampling-max-tokens.
	relaySamplingMaxTokens = "sampling/createMessage asks for more tokens (maxTokens) than this gateway relays"
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
	level    mcp.LoggingLevel        // the client's logging/setLevel; empty: none set
}

// setLevel records the level the client set (logging/setLevel): a log
// message below it is neither relayed nor counted against a call's bound.
func (r *relay) setLevel(l mcp.LoggingLevel) {
	r.mu.Lock()
	r.level = l
	r.mu.Unlock()
}

func (r *relay) logLevel() mcp.LoggingLevel {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.level
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
	// id names the call on its upstream stream: what the upstream asks
	// there is marked with it ([sessionpool.MetaCall]). Random, never sent
	// upstream.
	id       string
	ctx      context.Context // the client's tools/call request
	serverID string
	tool     string // the tool's name as the client knows it
	// sampling: the tool's contract, approved at the called digest, allows
	// the upstream to ask the client for a sampling.
	sampling bool
	logs     logBudget
	// end cancels the call's upstream context (the call's own end, or the
	// client ending its session: [relay.endCalls]).
	end context.CancelFunc
}

// endSessionCalls ends the calls in flight on the session r's DELETE ends,
// when the session is this replica's and r's principal (tenant and
// subject, as the SDK checks) is the one that opened it; anyone else's
// DELETE ends nothing here (the SDK refuses it). It runs before the SDK
// closes the session.
func (g *Gateway) endSessionCalls(r *http.Request) {
	id := r.Header.Get(sessionHeader)
	p, _, ok := bearer.FromContext(r.Context())
	if r.Method != http.MethodDelete || id == "" || !ok {
		return
	}
	g.relayMu.Lock()
	var rl *relay
	for ss, x := range g.relays {
		if ss.ID() == id {
			rl = x
			break
		}
	}
	g.relayMu.Unlock()
	if rl == nil || rl.st.p.Tenant != p.Tenant || rl.st.p.Subject != p.Subject {
		return
	}
	if n := rl.endCalls(); n > 0 {
		g.opts.Logger.InfoContext(r.Context(), "the client ended its session with calls in flight; they are cancelled upstream",
			slog.Int("calls", n), slog.String("tenant", p.Tenant), slog.String("subject", p.Subject))
	}
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

// begin records a call in flight to target, made by the client's request
// ctx; it returns the context to make the upstream call under (upCtx with
// the call's log sink: what the upstream logs on the call's stream reaches
// this call's stream, in order, before the answer, [sessionpool.WithLogSink])
// and the func that ends the call. sampling is whether the tool's approved
// contract allows the upstream to ask the client for a sampling during the
// call.
func (r *relay) begin(ctx, upCtx context.Context, target, serverID, tool string, sampling bool) (context.Context, func()) {
	upCtx, cancel := context.WithCancel(upCtx)
	c := &relayCall{id: rand.Text(), ctx: ctx, serverID: serverID, tool: tool, sampling: sampling, end: cancel}
	upCtx = sessionpool.WithCall(upCtx, c.id)
	r.mu.Lock()
	r.inFlight[target] = append(r.inFlight[target], c)
	r.mu.Unlock()
	return sessionpool.WithLogSink(upCtx, func(p *mcp.LoggingMessageParams) { r.log(c, p) }), func() {
		cancel()
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

// endCalls ends every call in flight on the session: their upstream
// contexts are cancelled, so each upstream is sent notifications/cancelled
// and each call returns. The client ended its session (DELETE): a call it
// left open must not run on until its deadline, which it would when the
// client's own notifications/cancelled was lost, because the SDK's session
// close waits for the session's handlers without cancelling them.
func (r *relay) endCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, list := range r.inFlight {
		for _, c := range list {
			c.end()
			n++
		}
	}
	return n
}

// asking is the call in flight to t that asked (the call whose id the
// tap marked the request with), or nil. A stdio server's requests carry no
// mark (its one pipe has no stream per call): the call is known only while
// it is the one call in flight to that server on this session (the
// session's own process); with two, neither is guessed.
func (r *relay) asking(t sessionpool.Target, id string) *relayCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.inFlight[t.Identity()]
	if id == "" {
		if t.URL == "" && len(list) == 1 {
			return list[0]
		}
		return nil
	}
	for _, c := range list {
		if c.id == id {
			return c
		}
	}
	return nil
}

// inFlightTo is the number of calls in flight to target.
func (r *relay) inFlightTo(target string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inFlight[target])
}

// current is the newest call in flight to target, or nil: the stream a
// notification not tied to a call goes out on while one is open.
func (r *relay) current(target string) *relayCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.inFlight[target]
	if len(list) == 0 {
		return nil
	}
	return list[len(list)-1]
}

// Log relays a log message the upstream at t sent outside a call's own
// stream (its standalone stream): on the stream of the newest call in
// flight to t (so a client without a standalone stream gets it too),
// shown as from its server only (no call sent it), within that call's
// bound; else on the session's standalone stream, shown as from
// "upstream".
func (r *relay) Log(_ context.Context, t sessionpool.Target, p *mcp.LoggingMessageParams) {
	call := r.current(t.Identity())
	if call != nil {
		call.logs.relay(r.ss, r.notifyCtx(call), p, origin(&relayCall{serverID: call.serverID}, p.Logger), r.logLevel())
		return
	}
	if atLeast(p.Level, r.logLevel()) {
		_ = r.ss.Log(context.Background(), relayedLog(p, origin(nil, p.Logger)))
	}
}

// log relays a log message of call to its stream, bounded
// ([logBudget]), at the level the client set (logging/setLevel; none
// before it sets one: the SDK's [mcp.ServerSession.Log]).
func (r *relay) log(call *relayCall, p *mcp.LoggingMessageParams) {
	call.logs.relay(r.ss, r.notifyCtx(call), p, origin(call, p.Logger), r.logLevel())
}

// Handle answers what the upstream at t sends the client: requests only
// when asked on the stream of a call in flight (the call whose id the tap
// marked them with: sent on that call's response stream, shown as from its
// server and tool, allowed or refused by that tool's contract, and ended
// when either the client's call or the upstream's request ends); resource
// updates on the newest call's stream, else the session's standalone
// stream. (Log messages: [relay.Log].)
func (r *relay) Handle(ctx context.Context, t sessionpool.Target, method string, req mcp.Request) (mcp.Result, error) {
	switch method {
	case "notifications/resources/updated":
		// Only for a resource this client subscribed to, under the URI it
		// knows; the SDK sends it to the principal's sessions subscribed
		// to that URI.
		if p, ok := req.GetParams().(*mcp.ResourceUpdatedNotificationParams); ok && p != nil {
			if listed, ok := r.watchedAs(t.Identity(), p.URI); ok && r.forwards(listed) {
				_ = r.st.server.ResourceUpdated(r.notifyCtx(r.current(t.Identity())), &mcp.ResourceUpdatedNotificationParams{URI: listed})
			}
		}
		return nil, nil
	case "notifications/elicitation/complete":
		return nil, nil
	}
	call := r.asking(t, sessionpool.CallOf(ctx))
	if call == nil && t.URL == "" && r.inFlightTo(t.Identity()) > 1 {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: relayStdioAmbiguous}
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
		out.Message = fmt.Sprintf("[%s] %s", origin(call, ""), bounded(p.Message, 4096))
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
	if bound := r.g.opts.SamplingMaxTokens; bound > 0 && p.MaxTokens > bound {
		r.g.opts.Logger.WarnContext(call.ctx, "sampling request refused: maxTokens over --sampling-max-tokens",
			"tenant", r.st.p.Tenant, "subject", r.st.p.Subject, "server", call.serverID, "tool", call.tool, "max_tokens", p.MaxTokens, "bound", bound)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s (%d)", relaySamplingMaxTokens, bound)}
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
// tool of the call in flight, or the server alone (a message no call
// sent), and the upstream's logger name, if any.
func origin(call *relayCall, logger string) string {
	s := "upstream"
	switch {
	case call != nil && call.tool != "":
		s = "server " + call.serverID + ", tool " + call.tool
	case call != nil:
		s = "server " + call.serverID
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

// Bounds of the log messages the gateway relays for one call.
const (
	// maxLogsPerCall: later messages of the call are dropped (the first
	// one dropped is replaced by a warning saying so).
	maxLogsPerCall = 100
	// maxLogData bounds a message's data (bytes of its JSON); longer data
	// is relayed as a string of its first maxLogData bytes.
	maxLogData = 8 << 10
)

// logsDropped is the warning relayed in place of a call's first log
// message over [maxLogsPerCall].
var logsDropped = fmt.Sprintf("the gateway relays at most %d log messages of one call; this call's later messages are dropped", maxLogsPerCall)

// logBudget counts the log messages relayed for one call. Safe for
// concurrent use.
type logBudget struct{ n atomic.Int32 }

// relay sends p to the client of ss under ctx (a call's request: its
// response stream), shown as from origin, when it is at level min or above
// (the level the client set, or at 2026-07-28 named in the request's
// `_meta`; empty: none), while the call's budget lasts.
func (b *logBudget) relay(ss *mcp.ServerSession, ctx context.Context, p *mcp.LoggingMessageParams, origin string, min mcp.LoggingLevel) {
	if !atLeast(p.Level, min) {
		return
	}
	switch n := b.n.Add(1); {
	case n <= maxLogsPerCall:
		_ = ss.Log(ctx, relayedLog(p, origin))
	case n == maxLogsPerCall+1:
		_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: bounded(origin, 256), Data: logsDropped})
	}
}

// relayedLog is p as the gateway relays it: its logger names origin, and
// data over [maxLogData] bytes of JSON is cut to a string.
func relayedLog(p *mcp.LoggingMessageParams, origin string) *mcp.LoggingMessageParams {
	out := &mcp.LoggingMessageParams{Level: p.Level, Logger: bounded(origin, 256), Data: p.Data}
	if b, err := json.Marshal(p.Data); err != nil || len(b) > maxLogData {
		out.Data = bounded(string(b), maxLogData)
	}
	return out
}

// logLevels are MCP's log levels (RFC 5424's severities), least severe
// first.
var logLevels = map[string]int{"debug": 1, "info": 2, "notice": 3, "warning": 4,
	"error": 5, "critical": 6, "alert": 7, "emergency": 8}

// atLeast reports whether a message at level l reaches a client at level
// min: min is a level and l is as severe or more (a level MCP does not name
// counts as debug, as the go-sdk has it).
func atLeast(l, min mcp.LoggingLevel) bool {
	m := logLevels[string(min)]
	return m > 0 && max(logLevels[string(l)], 1) >= m
}

// statelessLogs relays the log messages of a stateless (2026-07-28)
// client's tools/call: when the client's request names a level in `_meta`
// (io.modelcontextprotocol/logLevel; without one the server must send it
// none), the upstream call asks for that level the same way, and the
// messages the upstream sends on the call's stream go, bounded
// ([logBudget]) and shown as from the server and tool, on the client's
// call stream (ctx, the client's request; the SDK applies the level named
// there). It returns the context to make the upstream call under: upCtx
// with the call's log sink, or upCtx itself when no level is named (then
// nothing else is done for the call).
func statelessLogs(ctx, upCtx context.Context, req *mcp.CallToolRequest, params *mcp.CallToolParams, serverID, tool string) context.Context {
	level, _ := req.Params.Meta[mcp.MetaKeyLogLevel].(string)
	if logLevels[level] == 0 || req.Session == nil || !supportsInputRequests(req.Session) {
		return upCtx
	}
	params.Meta[mcp.MetaKeyLogLevel] = level
	ss := req.Session
	call := &relayCall{serverID: serverID, tool: tool}
	return sessionpool.WithLogSink(upCtx, func(p *mcp.LoggingMessageParams) {
		call.logs.relay(ss, ctx, p, origin(call, p.Logger), mcp.LoggingLevel(level))
	})
}
