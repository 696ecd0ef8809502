package upstream

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/platform/egress"
)

// Pool is a set of client sessions keyed by endpoint and credential. Safe
// for concurrent use.
type Pool struct {
	client *mcp.Client
	http   *http.Client

	mu       sync.Mutex
	sessions map[key]*entry
}

type key struct {
	url  string
	cred [32]byte
}

type entry struct {
	ready chan struct{}
	cs    *mcp.ClientSession
	err   error
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
	return &Pool{
		client: mcp.NewClient(&mcp.Implementation{Name: "toolcrib-gateway", Version: "1.0.0"}, &mcp.ClientOptions{Logger: logger,
			ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
				if onProgress != nil && req.Params != nil {
					onProgress(ctx, req.Params)
				}
			}}),
		http:     &http.Client{Transport: tr},
		sessions: map[key]*entry{},
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

// Session returns the session to url with credential (empty: none),
// connecting on first use.
func (p *Pool) Session(ctx context.Context, url, credential string) (*mcp.ClientSession, error) {
	k := key{url: url, cred: sha256.Sum256([]byte(credential))}
	p.mu.Lock()
	e := p.sessions[k]
	if e == nil {
		e = &entry{ready: make(chan struct{})}
		p.sessions[k] = e
		p.mu.Unlock()
		e.cs, e.err = p.connect(ctx, url, credential)
		close(e.ready)
		if e.err != nil {
			p.drop(k, e)
		}
		return e.cs, e.err
	}
	p.mu.Unlock()
	select {
	case <-e.ready:
		return e.cs, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *Pool) connect(ctx context.Context, url, credential string) (*mcp.ClientSession, error) {
	hc := p.http
	if credential != "" {
		hc = &http.Client{Transport: bearer{base: p.http.Transport, token: credential}}
	}
	// The session outlives this call: connect under a context that the
	// caller's cancellation does not end, bounded on its own.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cs, err := p.client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
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

// Call calls a tool on the session to url with credential. A transport
// failure drops the session, so the next call reconnects; the call itself
// is not retried (its lease is single use).
func (p *Pool) Call(ctx context.Context, url, credential string, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	cs, err := p.Session(ctx, url, credential)
	if err != nil {
		return nil, err
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) {
			k := key{url: url, cred: sha256.Sum256([]byte(credential))}
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
