package mcpapi

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/revision"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/gateway/internal/artifact"
	"github.com/toolcrib/toolcrib/services/gateway/internal/bearer"
	"github.com/toolcrib/toolcrib/services/gateway/internal/directory"
	"github.com/toolcrib/toolcrib/services/gateway/internal/metrics"
	"github.com/toolcrib/toolcrib/services/gateway/internal/sessionpool"
)

// Options configure a [Gateway].
type Options struct {
	// Admission and Lease are called with the client's own token.
	Admission admissionv1.AdmissionServiceClient
	Lease     leasev1.LeaseServiceClient
	// Directory reads contracts, descriptors and endpoints.
	Directory *directory.Directory
	// Upstream calls the MCP servers.
	Upstream *sessionpool.Pool
	// Artifacts stores results over the budget.
	Artifacts *artifact.Store
	// Redis keeps pending confirmations (shared by replicas).
	Redis *redisclient.Client
	// Cursors signs tools/list cursors.
	Cursors *revision.CursorCodec
	// Holder is the gateway's lease holder key.
	Holder ed25519.PrivateKey

	PageSize      int
	ListTTL       time.Duration
	WatchInterval time.Duration
	IdleTimeout   time.Duration
	// MaxSessionsPerPrincipal bounds one principal's open sessions on this
	// replica ([Gateway.sessionsFull]); 0 means no bound.
	MaxSessionsPerPrincipal int
	LeaseAudiencePrefix     string
	DefaultDeadline         time.Duration
	ConfirmTTL              time.Duration
	ResultBudget            int
	PreviewBytes            int
	MaxArtifactBytes        int
	Retention               time.Duration
	// ArtifactQuota bounds each tenant's unexpired artifacts.
	ArtifactQuota artifact.Quota

	// FindTools offers the find_tools search tool beside the visible set.
	FindTools bool

	// SamplingMaxTokens bounds the maxTokens of an upstream's
	// sampling/createMessage the gateway relays to a client; a larger one
	// is refused to the upstream (JSON-RPC -32602) and logged, and the
	// client is never asked. 0: no bound.
	SamplingMaxTokens int64

	// Confirmer sends the gateway's own confirmer token (under
	// principal.ConfirmerMetadataKey) beside the user's token on the
	// re-check of a call the user confirmed: only a confirmer may assert
	// MODE_USER_CONFIRMED. Nil: the gateway cannot assert a confirmation,
	// and a call that needs one is denied CONFIRMATION_UNANSWERABLE
	// without asking the user.
	Confirmer credentials.PerRPCCredentials

	// PeerURL is the URL this replica's peers reach its MCP endpoint at
	// (the listener, not the balancer); empty: its sessions are served
	// only by itself. PeerTransport carries forwarded requests (nil: the
	// default transport).
	PeerURL       string
	PeerTransport http.RoundTripper

	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Gateway is the MCP server of every principal. Each principal gets its own
// [mcp.Server] holding exactly its visible set, so a list_changed
// notification reaches only the principal whose set changed and a tool
// handler can never run for another principal.
type Gateway struct {
	opts      Options
	holderJWK []byte
	// proofs signs the holder proof of each call's lease (its header,
	// with the holder's public key, encoded once); nil when Holder is not
	// an Ed25519 key, and then every call is refused unavailable.
	proofs *lease.ProofSigner
	sdkLog *slog.Logger

	drainOnce sync.Once
	draining  chan struct{}

	mu         sync.Mutex
	principals map[string]*state

	progressMu sync.Mutex
	progress   map[string]progressSink // the gateway's progress token -> the calling client's

	relayMu sync.Mutex
	relays  map[*mcp.ServerSession]*relay // sessions' relays, until the session ends

	replicaID string // prefix of the session ids this replica holds
	peers     peers
}

// progressSink is where an upstream's progress for one call goes: the
// calling client's session, its own token, and the call's request
// context.
type progressSink struct {
	ss    *mcp.ServerSession
	token any
	// ctx is the context of the client's tools/call: the SDK sends a
	// notification made under it on that call's response stream, the only
	// stream a stateless request has (under any other context it is
	// dropped, or lands on a standalone stream the client may not hold).
	ctx context.Context
}

// RelayProgress forwards an upstream's progress notification to the client
// whose call it belongs to (by the token the gateway gave the call), on
// that call's response stream; others are dropped. The pool calls it
// before the upstream's answer to the call is read
// ([sessionpool.New]), so none is lost to the answer overtaking it.
func (g *Gateway) RelayProgress(_ context.Context, p *mcp.ProgressNotificationParams) {
	tok, _ := p.ProgressToken.(string)
	g.progressMu.Lock()
	sink, ok := g.progress[tok]
	g.progressMu.Unlock()
	if !ok || sink.ss == nil || sink.ctx.Err() != nil {
		return
	}
	_ = sink.ss.NotifyProgress(sink.ctx, &mcp.ProgressNotificationParams{ProgressToken: sink.token, Progress: p.Progress, Total: p.Total, Message: bounded(p.Message, 1024)})
}

// New returns a gateway.
func New(opts Options) *Gateway {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	proofs, _ := lease.NewProofSigner(opts.Holder) // nil: refused per call
	return &Gateway{
		opts:       opts,
		holderJWK:  lease.PublicJWK(opts.Holder.Public().(ed25519.PublicKey)),
		proofs:     proofs,
		sdkLog:     slog.New(warnOnly{opts.Logger.Handler()}),
		principals: map[string]*state{},
		draining:   make(chan struct{}),
		progress:   map[string]progressSink{},
		relays:     map[*mcp.ServerSession]*relay{},
		replicaID:  newReplicaID(),
		peers:      peers{byID: map[string]peer{}},
	}
}

// state is one principal's server, for one agent run when the client
// names it ([RunIDHeader]), and what it was last shown.
type state struct {
	key    string
	pkey   string // principalKey of p: the states of one principal share it
	runID  string
	p      principal.Principal
	server *mcp.Server

	mu        sync.Mutex
	token     string
	tokenExp  time.Time
	lastUsed  time.Time
	listeners int
	set       *visibleSet
	shown     map[string]*shownTool  // every tool shown since the state was made, by model name
	prompts   map[string]promptRef   // the last prompts/list, by name as listed
	resources map[string]resourceRef // the last upstream resources listed, by URI as listed
	templates []templateRef          // the last upstream resource templates listed
	watchers  map[string][]*relay    // sessions subscribed to an upstream resource, by URI as listed

	regMu      sync.Mutex            // serializes changes of the server's tools
	registered map[string]*shownTool // tools registered on server, by name
}

// maxShown bounds the tools remembered as shown; past it the memory is
// reset to the current set.
const maxShown = 8192

// RunIDHeader names the agent run a request belongs to. Admission binds a
// run's generation for the run's lifetime (I11) and admits a server in
// CANARY only for runs inside its share, so a client that sends it gets
// the visible set and the decisions of that run; without it a canary
// server lists and admits nothing. A run id in platform/ids' grammar
// ([ids.RunIDPattern]).
const RunIDHeader = "Toolcrib-Run-Id"

// maxRunsPerPrincipal bounds the run states one principal keeps on a
// replica; past it the least recently used one without listeners goes.
const maxRunsPerPrincipal = 64

// Handler is the MCP endpoint (streamable HTTP): stateless for 2026-07-28
// and later, with sessions (Mcp-Session-Id) for a client that initializes
// at an older version ([route]). It must be wrapped by [bearer.Require]: a
// session belongs to the principal that opened it (tenant and subject of
// its token, [bearer.Require]'s user id), and a request of another
// principal naming it is refused 403 by the SDK's session check. A
// session idle for the idle timeout is closed; a request for a session
// another replica holds is passed to it ([Gateway.forward]). A request with a malformed
// [RunIDHeader] is refused 400 before it reaches MCP, and so is a JSON-RPC
// batch (one JSON-RPC error, on every protocol version).
func (g *Gateway) Handler() http.Handler {
	// A session's POST SSE streams start with a priming event (an id, empty
	// data, and the retry field: [withSSERetry]) from which a client whose
	// stream broke resumes (MCP 2025-11-25, SEP-1699); the events are kept
	// in memory (bounded) on the replica that holds the session.
	stateful := withSSERetry(mcp.NewStreamableHTTPHandler(g.serverFor, &mcp.StreamableHTTPOptions{Logger: g.sdkLog, SessionTimeout: g.opts.IdleTimeout,
		EventStore: mcp.NewMemoryEventStore(nil)}))
	h := route(
		mcp.NewStreamableHTTPHandler(g.serverFor, &mcp.StreamableHTTPOptions{Stateless: true, Logger: g.sdkLog}),
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if g.forward(w, r) {
				return
			}
			// A POST without a session here is an initialize ([route]):
			// it opens a session, bounded per principal.
			if r.Method == http.MethodPost && r.Header.Get(sessionHeader) == "" && g.sessionsFull(r) {
				w.Header().Set("Retry-After", "60")
				http.Error(w, fmt.Sprintf("this principal holds %d open MCP sessions on this gateway, the most it may; end one (DELETE with its Mcp-Session-Id) or let one idle out", g.opts.MaxSessionsPerPrincipal), http.StatusTooManyRequests)
				return
			}
			g.endSessionCalls(r)
			stateful.ServeHTTP(w, r)
		}),
	)
	return refuseBatches(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if vs := r.Header.Values(RunIDHeader); len(vs) > 1 || len(vs) == 1 && !ids.ValidRunID(vs[0]) {
			http.Error(w, RunIDHeader+": one run id of "+ids.RunIDSyntax, http.StatusBadRequest)
			return
		}
		h.ServeHTTP(w, r)
	}))
}

// sessionsFull reports whether the principal of r holds
// MaxSessionsPerPrincipal open sessions on this replica (every run of it
// counted): one token must not hold unbounded sessions, each with its own
// upstream sessions and streams.
func (g *Gateway) sessionsFull(r *http.Request) bool {
	if g.opts.MaxSessionsPerPrincipal <= 0 {
		return false
	}
	p, _, ok := bearer.FromContext(r.Context())
	if !ok {
		return false
	}
	pk := principalKey(p)
	g.mu.Lock()
	var servers []*mcp.Server
	for _, st := range g.principals {
		if st.pkey == pk {
			servers = append(servers, st.server)
		}
	}
	g.mu.Unlock()
	n := 0
	for _, s := range servers {
		for ss := range s.Sessions() {
			if ss.ID() != "" {
				n++
			}
		}
	}
	return n >= g.opts.MaxSessionsPerPrincipal
}

func principalKey(p principal.Principal) string {
	groups := slices.Clone(p.Groups)
	slices.Sort(groups)
	h := sha256.New()
	for _, s := range []string{p.Tenant, p.Subject, strings.Join(groups, "\x1f")} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if p.Admin {
		h.Write([]byte("admin"))
	}
	if p.Service {
		h.Write([]byte("service"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// serverFor returns the calling principal's server.
func (g *Gateway) serverFor(r *http.Request) *mcp.Server {
	p, tok, ok := bearer.FromContext(r.Context())
	if !ok {
		return nil
	}
	st := g.stateOf(p, r.Header.Get(RunIDHeader))
	st.mu.Lock()
	st.lastUsed = time.Now()
	if p.ExpiresAt.After(st.tokenExp) || st.token == "" {
		st.token, st.tokenExp = tok, p.ExpiresAt
	}
	st.mu.Unlock()
	return st.server
}

func (g *Gateway) stateOf(p principal.Principal, runID string) *state {
	pk := principalKey(p)
	k := pk
	if runID != "" {
		sum := sha256.Sum256([]byte(pk + "\x00run\x00" + runID))
		k = hex.EncodeToString(sum[:])
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.principals[k]; st != nil {
		return st
	}
	if runID != "" {
		g.evictRunsOf(pk)
	}
	st := &state{key: k, pkey: pk, runID: runID, p: p, shown: map[string]*shownTool{}, registered: map[string]*shownTool{}, watchers: map[string][]*relay{}, lastUsed: time.Now()}
	st.server = mcp.NewServer(&mcp.Implementation{Name: "toolcrib-gateway", Title: "toolcrib MCP gateway", Version: "1.0.0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{
			Tools:       &mcp.ToolCapabilities{ListChanged: true},
			Resources:   &mcp.ResourceCapabilities{Subscribe: true},
			Prompts:     &mcp.PromptCapabilities{},
			Completions: &mcp.CompletionCapabilities{},
			// Upstreams' log messages, relayed to a session at the level
			// its client set (logging/setLevel; none before it does).
			Logging: &mcp.LoggingCapabilities{},
		},
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			return g.subscribe(ctx, st, req.Session, req.GetExtra(), req.Params.URI, true)
		},
		UnsubscribeHandler: func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			return g.subscribe(ctx, st, req.Session, req.GetExtra(), req.Params.URI, false)
		},
		CompletionHandler: func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return g.complete(ctx, st, req)
		},
		Instructions: "Tools here are the ones toolcrib lets you call now. A denied call is a tool error naming the reason and what to do; " +
			"large results are stored as resources (toolcrib-artifact://…) readable with resources/read.",
		Logger:       g.sdkLog,
		GetSessionID: g.newSessionID,
	})
	st.server.AddReceivingMiddleware(g.middleware(st))
	g.principals[k] = st
	return st
}

// evictRunsOf makes room for one more run state of the principal pk: at
// [maxRunsPerPrincipal] run states, the least recently used one without a
// listener is forgotten (its run lists anew on its next request). g.mu is
// held.
func (g *Gateway) evictRunsOf(pk string) {
	var runs int
	var oldest string
	var oldestAt time.Time
	for k, st := range g.principals {
		if st.pkey != pk || st.runID == "" {
			continue
		}
		runs++
		st.mu.Lock()
		used, listening := st.lastUsed, st.listeners > 0
		st.mu.Unlock()
		if !listening && (oldest == "" || used.Before(oldestAt)) {
			oldest, oldestAt = k, used
		}
	}
	if runs >= maxRunsPerPrincipal && oldest != "" {
		delete(g.principals, oldest)
	}
}

// middleware answers tools/list, resources/list and resources/read itself,
// runs the pipeline for calls of tools shown but no longer visible, and
// counts subscriptions/listen streams; results of tools/call,
// resources/read and prompts/get carry resultType exactly at 2026-07-28
// and later ([withResultType]).
func (g *Gateway) middleware(st *state) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		h := g.answer(st, next)
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := h(ctx, method, req)
			switch method {
			case "tools/call", "resources/read", "prompts/get":
				if ss, ok := req.GetSession().(*mcp.ServerSession); ok && err == nil {
					res = withResultType(ss, res)
				}
			}
			return res, err
		}
	}
}

// answer is the middleware's handler: the requests the gateway answers
// itself, the others passed to next.
func (g *Gateway) answer(st *state, next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list":
			if r, ok := req.(*mcp.ListToolsRequest); ok {
				return g.listTools(ctx, st, r)
			}
		case "tools/call":
			if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil && !st.isRegistered(r.Params.Name) {
				if st.current() == nil {
					// Nothing listed on this replica yet (the client
					// listed on another): read the set first.
					if _, tok, ok := bearer.From(r.GetExtra().TokenInfo); ok {
						if _, err := g.sync(ctx, st, tok); err != nil {
							return unavailable("admission", err), nil
						}
					}
				}
				if !st.isRegistered(r.Params.Name) {
					return g.call(ctx, st, r, false)
				}
			}
		case "resources/list":
			if r, ok := req.(*mcp.ListResourcesRequest); ok {
				return g.listResources(ctx, st, r)
			}
		case "resources/templates/list":
			if r, ok := req.(*mcp.ListResourceTemplatesRequest); ok {
				return g.listTemplates(ctx, st, r)
			}
		case "prompts/list":
			if r, ok := req.(*mcp.ListPromptsRequest); ok {
				return g.listPrompts(ctx, st, r)
			}
		case "prompts/get":
			if r, ok := req.(*mcp.GetPromptRequest); ok {
				return g.getPrompt(ctx, st, r)
			}
		case "resources/read":
			if r, ok := req.(*mcp.ReadResourceRequest); ok {
				return g.readArtifact(ctx, st, r)
			}
		case "logging/setLevel":
			// The session's relay filters and bounds by the level set.
			res, err := next(ctx, method, req)
			p, ok := req.GetParams().(*mcp.SetLoggingLevelParams)
			if ss, isSS := req.GetSession().(*mcp.ServerSession); ok && isSS && p != nil && err == nil {
				if rl := g.relayOf(st, ss); rl != nil {
					rl.setLevel(p.Level)
				}
			}
			return res, err
		case "subscriptions/listen":
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			go func() {
				select {
				case <-g.draining:
					cancel()
				case <-ctx.Done():
				}
			}()
			st.mu.Lock()
			st.listeners++
			st.mu.Unlock()
			defer func() {
				st.mu.Lock()
				st.listeners--
				st.mu.Unlock()
			}()
		}
		return next(ctx, method, req)
	}
}

func (st *state) current() *visibleSet {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.set
}

func (st *state) isRegistered(name string) bool {
	st.regMu.Lock()
	defer st.regMu.Unlock()
	_, ok := st.registered[name]
	return ok
}

// Run re-reads the visible set of every principal with an open
// subscriptions/listen stream every watch interval (sending list_changed
// when it changed) and forgets idle principals, until ctx ends.
func (g *Gateway) Run(ctx context.Context) error {
	t := time.NewTicker(g.opts.WatchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := time.Now()
		g.mu.Lock()
		var watch []*state
		for k, st := range g.principals {
			st.mu.Lock()
			idle := st.listeners == 0 && now.Sub(st.lastUsed) > g.opts.IdleTimeout
			live := st.listeners > 0 && now.Before(st.tokenExp)
			tok := st.token
			st.mu.Unlock()
			if idle {
				delete(g.principals, k)
				continue
			}
			if live && tok != "" {
				watch = append(watch, st)
			}
		}
		g.mu.Unlock()
		for _, st := range watch {
			st.mu.Lock()
			tok := st.token
			st.mu.Unlock()
			wctx, cancel := context.WithTimeout(ctx, g.opts.WatchInterval*4)
			if _, err := g.sync(wctx, st, tok); err != nil && ctx.Err() == nil {
				g.opts.Logger.DebugContext(ctx, "visible-set watch: admission did not answer", "tenant", st.p.Tenant, "subject", st.p.Subject, "error", err)
			}
			cancel()
		}
	}
}

// SweepArtifacts deletes expired artifacts every interval until ctx ends.
func (g *Gateway) SweepArtifacts(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := g.opts.Artifacts.Sweep(ctx)
		if err != nil {
			if ctx.Err() == nil {
				g.opts.Logger.WarnContext(ctx, "artifact retention sweep failed; will retry", "error", err)
			}
			continue
		}
		g.opts.Metrics.Swept(n)
	}
}

// withToken is the call option presenting the client's token to a toolcrib
// service.
func withToken(tok string) grpc.CallOption {
	return grpc.PerRPCCredentials(principal.BearerToken(tok))
}

// warnOnly passes on the SDK's warnings and errors only (it logs every
// stateless request's session at info).
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnOnly) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnOnly{h.Handler.WithAttrs(attrs)}
}

func (h warnOnly) WithGroup(name string) slog.Handler { return warnOnly{h.Handler.WithGroup(name)} }

// Drain ends every open subscriptions/listen stream (the HTTP server's
// graceful shutdown waits for them otherwise); calls in flight finish.
func (g *Gateway) Drain() {
	g.drainOnce.Do(func() { close(g.draining) })
}
