package sessionpool

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/platform/egress"
	"github.com/toolcrib/toolcrib/platform/stdio"
)

// CredentialEnv is the default environment variable a stdio server
// receives the audience class's credential in (discovery's default, for
// the same server).
const CredentialEnv = stdio.CredentialEnv

// Target is one upstream as an audience class reaches it: a streamable
// HTTP endpoint, or a stdio server's command, with the class's credential.
type Target struct {
	// URL is the streamable HTTP endpoint; empty for a stdio server.
	URL string
	// Command and Args start a stdio server (when URL is empty).
	Command string
	Args    []string
	// ContentIdentity is the stdio server's identity as checked for this
	// call ([stdio.Hasher.Identity]: its command line and the content it
	// runs); empty keys the session by the command line alone.
	ContentIdentity string
	// BeforeStart, when set, runs right before a stdio server's process is
	// started; its error is returned and nothing is started.
	BeforeStart func() error
	// Credential is the class's upstream credential: a bearer token over
	// HTTP, the CredentialEnv variable of a stdio server; empty for none.
	Credential string
}

// Identity is what sessions are keyed by: the URL, or for a stdio server
// `stdio:` and its content identity (the identity discovery pins), so a
// process started from other code is never reused for a call checked
// against this code; without one, the digest of its command line.
func (t Target) Identity() string {
	if t.URL != "" {
		return t.URL
	}
	if t.ContentIdentity != "" {
		return "stdio:" + t.ContentIdentity
	}
	return "stdio:" + stdio.CommandDigest(t.Command, t.Args)
}

// ErrTooLarge is returned by [Pool.Call] when the upstream's answer is
// larger than [Pool.MaxMessageBytes].
var ErrTooLarge = errors.New("upstream: the answer is larger than the gateway accepts")

// MessageBytesFor is the message bound that lets a result of maxResult
// bytes through: JSON escaping may double the text (and more for text
// made mostly of escaped characters), plus room for the envelope.
func MessageBytesFor(maxResult int) int { return 2*maxResult + 1<<20 }

// Pool is a set of client sessions keyed by endpoint and credential. Safe
// for concurrent use.
type Pool struct {
	// CredentialEnv names the variable a stdio server gets the credential
	// in; empty for [CredentialEnv]. Set before the first call.
	CredentialEnv string
	// MaxMessageBytes bounds one message an HTTP upstream sends (one SSE
	// event or one JSON body); 0 means no bound (go-sdk v1.8.0 reads a JSON
	// body whole and passes an unset event bound on as "no cap", though its
	// doc promises 16 MiB). A larger message fails the call with
	// [ErrTooLarge], never a truncated result. Set before the first call,
	// from [MessageBytesFor].
	MaxMessageBytes int

	// client speaks to HTTP upstreams: their progress reaches onProgress
	// through [sseTap]; stdioClient to stdio servers, whose progress
	// the SDK's handler relays.
	client      *mcp.Client
	stdioClient *mcp.Client
	onProgress  func(context.Context, *mcp.ProgressNotificationParams)
	http        *http.Client
	logger      *slog.Logger

	mu       sync.Mutex
	sessions map[key]*entry
}

type key struct {
	identity string
	cred     [32]byte
	caller   string // the caller's key for a caller's own session, else empty
}

func keyOf(t Target) key {
	return key{identity: t.Identity(), cred: sha256.Sum256([]byte(t.Credential))}
}

type entry struct {
	ready chan struct{}
	// cs and err are written under Pool.mu once connected, before ready
	// is closed.
	cs  *mcp.ClientSession
	err error
	// logs asks a shared session's upstream, once, to send every log
	// message ([Pool.askLogs]).
	logs sync.Once
}

// New returns a pool dialing through policy; onProgress, if set, receives
// every progress notification an upstream sends (the gateway relays the
// ones whose token it gave a call).
func New(policy egress.Policy, logger *slog.Logger, onProgress func(context.Context, *mcp.ProgressNotificationParams)) *Pool {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		Proxy:               nil, // never route a credential through an ambient proxy
		DialContext:         policy.DialContext(dialer),
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	if logger == nil {
		logger = slog.Default()
	}
	impl := &mcp.Implementation{Name: "toolcrib-gateway", Version: "1.0.0"}
	// The shared sessions serve stateless callers: an upstream's
	// input-required result (2026-07-28) goes back to the caller, who
	// answers it in its retry, never fulfilled by the pool.
	mrtr := &mcp.MultiRoundTripOptions{Disabled: true}
	return &Pool{
		client: mcp.NewClient(impl, &mcp.ClientOptions{Logger: logger, MultiRoundTrip: mrtr}),
		stdioClient: mcp.NewClient(impl, &mcp.ClientOptions{Logger: logger, MultiRoundTrip: mrtr,
			ProgressNotificationHandler: progressHandler(onProgress)}),
		onProgress: onProgress,
		logger:     logger,
		http:       &http.Client{Transport: tr},
		sessions:   map[key]*entry{},
	}
}

// progressHandler hands the progress a stdio server sends (on its one
// pipe, not through the tap) to onProgress.
func progressHandler(onProgress func(context.Context, *mcp.ProgressNotificationParams)) func(context.Context, *mcp.ProgressNotificationClientRequest) {
	return func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
		if onProgress != nil && req.Params != nil {
			onProgress(ctx, req.Params)
		}
	}
}

type bearer struct {
	base  http.RoundTripper
	token string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// Session returns the session to t, connecting on first use (for a stdio
// server: starting its process, which then serves every call until it
// exits or the pool closes).
func (p *Pool) Session(ctx context.Context, t Target) (*mcp.ClientSession, error) {
	return p.sessionOn(ctx, keyOf(t), func() (*mcp.ClientSession, error) { return p.connect(t) })
}

// sessionOn returns the session under k, made by connect on first use.
func (p *Pool) sessionOn(ctx context.Context, k key, connect func() (*mcp.ClientSession, error)) (*mcp.ClientSession, error) {
	p.mu.Lock()
	e := p.sessions[k]
	if e == nil {
		e = &entry{ready: make(chan struct{})}
		p.sessions[k] = e
		p.mu.Unlock()
		cs, err := connect()
		// Under the lock: an ended session's watcher ([Pool.connectFor])
		// and a failed call read the entry under its key, this one while it
		// connects.
		p.mu.Lock()
		e.cs, e.err = cs, err
		p.mu.Unlock()
		close(e.ready)
		if err != nil {
			p.drop(k, e)
		}
		return cs, err
	}
	p.mu.Unlock()
	select {
	case <-e.ready:
		return e.cs, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// connect opens the shared session to t: over HTTP without the standalone
// stream (what an upstream sends there belongs to no one caller).
func (p *Pool) connect(t Target) (*mcp.ClientSession, error) {
	client := p.client
	if t.URL == "" {
		client = p.stdioClient
	}
	return p.connectWith(client, t, false, nil)
}

// connectWith opens a session to t as client; standalone opens the HTTP
// standalone stream for what the server sends outside a request (for a
// stdio server: a caller's own process, at 2025-11-25); onLog
// takes the log messages of streams whose request carries no log sink
// ([WithLogSink]; nil drops them). The
// client negotiates the newest protocol the server speaks: 2026-07-28 by
// server/discover, else initialize at 2025-11-25, which the server may
// answer with an older version it speaks (2025-06-18).
func (p *Pool) connectWith(client *mcp.Client, t Target, standalone bool, onLog func(context.Context, *mcp.LoggingMessageParams)) (*mcp.ClientSession, error) {
	var tr mcp.Transport
	if t.URL == "" {
		if t.Command == "" {
			return nil, errors.New("upstream: neither a URL nor a command")
		}
		if t.BeforeStart != nil {
			if err := t.BeforeStart(); err != nil {
				return nil, err
			}
		}
		cmd := exec.Command(t.Command, t.Args...)
		name := p.CredentialEnv
		if name == "" {
			name = CredentialEnv
		}
		cmd.Env = stdio.Env(name, t.Credential)
		tr = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	} else {
		hc := p.http
		if t.Credential != "" {
			hc = &http.Client{Transport: bearer{base: p.http.Transport, token: t.Credential}}
		}
		maxEvent := p.MaxMessageBytes
		if maxEvent <= 0 {
			maxEvent = -1 // the SDK's "no cap", whatever its default becomes
		}
		tr = &mcp.StreamableClientTransport{Endpoint: t.URL, HTTPClient: &http.Client{Transport: limitJSON{base: hc.Transport, max: p.MaxMessageBytes, hooks: &tapHooks{onProgress: p.onProgress, onLog: onLog}}},
			DisableStandaloneSSE: !standalone, MaxRetries: -1, MaxEventSize: maxEvent}
	}
	// The session outlives this call: connect under a context of its own,
	// neither ended by the caller's cancellation nor carrying the caller's
	// request values (the SDK would tie what the upstream sends later to
	// the first caller's request), bounded on its own.
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var opts *mcp.ClientSessionOptions
	if t.URL == "" && standalone {
		// A caller's own stdio process ([Pool.CallFor]) is there for the
		// server to ask the caller (elicitation, sampling, roots), which a
		// server may do by request up to 2025-11-25 only.
		opts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	}
	cs, err := client.Connect(cctx, tr, opts)
	if err != nil {
		if re := egress.Refused(err); re != nil {
			return nil, fmt.Errorf("upstream: %s", re.Description())
		}
		return nil, fmt.Errorf("upstream: connect: %w", err)
	}
	return cs, nil
}

func (p *Pool) drop(k key, e *entry) {
	p.mu.Lock()
	if p.sessions[k] == e {
		delete(p.sessions, k)
	}
	p.mu.Unlock()
}

// Call calls a tool on the session to t. A transport failure drops the
// session (a stdio server that exited is started again by the next call),
// a call whose context ended does not, but on a stdio server ([endedByCaller]);
// the call itself is not retried (its lease is single use), except when
// the server answered that it no longer knows the session (HTTP 404 to a
// session id): the request was refused before any tool ran, and the call
// is made once more on a new session.
func (p *Pool) Call(ctx context.Context, t Target, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return p.callOn(ctx, keyOf(t), t, params, func() (*mcp.ClientSession, error) { return p.connect(t) })
}

func (p *Pool) callOn(ctx context.Context, k key, t Target, params *mcp.CallToolParams, connect func() (*mcp.ClientSession, error)) (*mcp.CallToolResult, error) {
	res, err := p.callOnce(ctx, k, t, params, connect)
	if errors.Is(err, mcp.ErrSessionMissing) {
		res, err = p.callOnce(ctx, k, t, params, connect)
	}
	return res, err
}

func (p *Pool) callOnce(ctx context.Context, k key, t Target, params *mcp.CallToolParams, connect func() (*mcp.ClientSession, error)) (*mcp.CallToolResult, error) {
	cs, err := p.sessionOn(ctx, k, connect)
	if err != nil {
		return nil, err
	}
	if k.caller == "" && t.URL != "" && logSinkOf(ctx) != nil {
		p.askLogs(k, cs)
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil && tooLarge(err) {
		err = fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, p.MaxMessageBytes)
	}
	if err != nil {
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) && !endedByCaller(ctx, t) {
			p.mu.Lock()
			if e := p.sessions[k]; e != nil && e.cs == cs {
				delete(p.sessions, k)
				p.mu.Unlock()
				_ = cs.Close()
			} else {
				p.mu.Unlock()
			}
		}
		return nil, err
	}
	return res, nil
}

// askLogs makes the shared session cs to an upstream that speaks a
// version before 2026-07-28 send every log message, the first time a call
// on it wants them (a call with a log sink: a stateless caller that named a
// level). Before 2026-07-28 a request cannot name its level: the upstream
// sends a session none until logging/setLevel (the go-sdk's stateful
// server), so the gateway asks for all, once, and each call's sink keeps
// what its caller asked for; messages of calls without a sink are dropped
// as they are read.
func (p *Pool) askLogs(k key, cs *mcp.ClientSession) {
	r := cs.InitializeResult()
	if r == nil || r.Capabilities == nil || r.Capabilities.Logging == nil || r.ProtocolVersion >= "2026-07-28" {
		return
	}
	p.mu.Lock()
	e := p.sessions[k]
	p.mu.Unlock()
	if e == nil || e.cs != cs {
		return
	}
	e.logs.Do(func() {
		lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := cs.SetLoggingLevel(lctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			p.logger.Debug("upstream refused logging/setLevel", "error", err)
		}
	})
}

// endedByCaller reports whether a call to t failed while its context had
// ended (the client cancelled, or the deadline passed), which says nothing
// of the session: an HTTP session is then kept. The SDK tells the upstream
// notifications/cancelled after the call has returned, off the caller's
// path; a session being closed meanwhile refuses to send it (the SDK's
// connection sends a notification while closing only if a request is still
// in flight) and refuses the answers to the upstream's requests still open
// (an elicitation relayed to the client), and the DELETE that closing sends
// does not end the upstream's handler (a go-sdk server waits for its
// handlers before it closes a session): the upstream's call was left
// running for good (issue 23). A stdio session is closed as before: ending
// its process ends its calls, and a server that hung is started anew.
func endedByCaller(ctx context.Context, t Target) bool {
	return t.URL != "" && ctx.Err() != nil
}

// errJSONTooLarge is the read error of a JSON answer over the bound; its
// text, like the SDK's for an SSE event over its bound, is how a failed
// call is recognized as too large (the SDK passes on only the text).
var errJSONTooLarge = errors.New("JSON answer exceeded the message bound")

// tooLarge reports whether err is a call failed by a message bound: the
// SDK's SSE event bound or limitJSON's.
func tooLarge(err error) bool {
	s := err.Error()
	return strings.Contains(s, errJSONTooLarge.Error()) || strings.Contains(s, "SSE event exceeded")
}

// limitJSON bounds the body of a JSON answer (the SDK reads it whole); an
// SSE answer is bounded per event by the SDK, and passes through [sseTap]
// when there is something to tap for: progress (onProgress), a caller's
// log messages (onLog) or a request's log sink ([WithLogSink]).
type limitJSON struct {
	base  http.RoundTripper
	max   int
	hooks *tapHooks
}

func (l limitJSON) RoundTrip(r *http.Request) (*http.Response, error) {
	base := l.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The sink is looked up only when neither hook is set (never in
		// the gateway, whose pool always relays progress), and by the tap
		// only when a log message arrives.
		if l.hooks.onProgress != nil || l.hooks.onLog != nil || logSinkOf(r.Context()) != nil || callOf(r.Context()) != "" {
			resp.Body = &sseTap{rc: resp.Body, hooks: l.hooks, req: r}
		}
		return resp, nil
	}
	if l.max <= 0 {
		return resp, nil
	}
	resp.Body = &limitedBody{rc: resp.Body, left: int64(l.max)}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte past the bound tells a body of exactly the bound from
		// a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, errJSONTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// Close closes every session.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, e := range p.sessions {
		select {
		case <-e.ready:
			if e.cs != nil {
				_ = e.cs.Close()
			}
		default:
		}
		delete(p.sessions, k)
	}
}
