package mcpapi

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Sessions and replicas. A session (Mcp-Session-Id) is a live object of
// the replica that opened it: the SDK's session with its JSON-RPC
// connection, the client's pending requests (elicitations relayed to it,
// its call streams) and the session's own upstream sessions. None of that
// can be written to Redis and resumed elsewhere mid-call. So a session
// stays on its replica, and the others pass its requests there: the
// session id starts with the id of the replica that holds it, every
// replica advertises the URL its peers reach it at in Redis (with a TTL),
// and a replica that gets a request for a session it does not hold sends
// it on, streams included, to the holder (once: a forwarded request is
// never forwarded again). A replica that is gone takes its sessions with
// it: its peers answer 404, and the client initializes a new session, as
// MCP clients do on 404.

// forwardedHeader marks a request one replica passed to another.
const forwardedHeader = "Toolcrib-Forwarded-By"

// peerTTL is how long a replica's advertisement lives without renewal.
const peerTTL = 30 * time.Second

// peerCacheTTL is how long a replica remembers a peer's URL.
const peerCacheTTL = 5 * time.Second

// replicaIDLength is the length of a replica id (base32 of crypto/rand).
const replicaIDLength = 26

// newReplicaID returns a random replica id.
func newReplicaID() string { return rand.Text()[:replicaIDLength] }

// newSessionID is a session id held by this replica.
func (g *Gateway) newSessionID() string { return g.replicaID + "." + rand.Text() }

// holderOf is the replica id a session id names, or "".
func holderOf(session string) string {
	id, _, ok := strings.Cut(session, ".")
	if !ok || len(id) != replicaIDLength {
		return ""
	}
	return id
}

func (g *Gateway) peerKey(id string) string { return g.opts.Redis.Key("gateway", "replica", id) }

// Advertise keeps this replica's peer URL in Redis until ctx ends (then it
// removes it). Without a peer URL it does nothing: the replica's sessions
// are then reachable only on the replica itself.
func (g *Gateway) Advertise(ctx context.Context) error {
	if g.opts.PeerURL == "" || g.opts.Redis == nil {
		return nil
	}
	t := time.NewTicker(peerTTL / 3)
	defer t.Stop()
	for {
		if err := g.opts.Redis.Set(ctx, g.peerKey(g.replicaID), g.opts.PeerURL, peerTTL).Err(); err != nil && ctx.Err() == nil {
			g.opts.Logger.WarnContext(ctx, "cannot advertise this replica to its peers; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = g.opts.Redis.Del(dctx, g.peerKey(g.replicaID)).Err()
			cancel()
			return nil
		case <-t.C:
		}
	}
}

// peers caches the proxies to peer replicas.
type peers struct {
	mu   sync.Mutex
	byID map[string]peer

	once      sync.Once
	transport http.RoundTripper
}

type peer struct {
	proxy *httputil.ReverseProxy
	at    time.Time
}

// maxPeers bounds the cached peers (ids come from clients' session ids;
// only ids advertised in Redis are cached).
const maxPeers = 256

// forward passes r to the replica holding its session and reports
// whether it did; false leaves r to this replica (which answers 404 for a
// session it does not hold).
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request) bool {
	id := holderOf(r.Header.Get(sessionHeader))
	if id == "" || id == g.replicaID || r.Header.Get(forwardedHeader) != "" || g.opts.Redis == nil {
		return false
	}
	proxy := g.peerProxy(r.Context(), id)
	if proxy == nil {
		return false
	}
	r = r.Clone(r.Context())
	r.Header.Set(forwardedHeader, g.replicaID)
	// The holder's answer (an SSE stream) may start before the proxy's
	// copy of the request body has read its end: without full duplex the
	// HTTP/1 server closes the body when the answer's headers go out, the
	// copy fails and the stream to the holder is torn down ("request
	// terminated without response" at the client, about one run in ten of
	// TestGatewaySessionAcrossReplicas). HTTP/2 is full duplex already.
	if r.ProtoMajor == 1 {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			g.opts.Logger.WarnContext(r.Context(), "forwarding a session's request without full duplex", "error", err)
		}
	}
	proxy.ServeHTTP(w, r)
	return true
}

// peerTransport is [Options.PeerTransport], else a transport that never
// goes through an ambient HTTP proxy (forwarded requests carry the
// client's bearer token).
func (g *Gateway) peerTransport() http.RoundTripper {
	if g.opts.PeerTransport != nil {
		return g.opts.PeerTransport
	}
	g.peers.once.Do(func() {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		g.peers.transport = tr
	})
	return g.peers.transport
}

// peerProxy returns the proxy to the replica id, nil when none is
// advertised.
func (g *Gateway) peerProxy(ctx context.Context, id string) *httputil.ReverseProxy {
	g.peers.mu.Lock()
	p, ok := g.peers.byID[id]
	g.peers.mu.Unlock()
	if ok && time.Since(p.at) < peerCacheTTL {
		return p.proxy
	}
	raw, err := g.opts.Redis.Get(ctx, g.peerKey(id)).Result()
	if err != nil {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.URL.Path, pr.Out.URL.RawPath = u.Scheme, u.Host, u.Path, ""
			pr.Out.Host = u.Host
		},
		Transport:     g.peerTransport(),
		FlushInterval: -1, // SSE streams flow as they are written
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			http.Error(w, "the replica holding this session did not answer; start a new session", http.StatusNotFound)
		},
	}
	g.peers.mu.Lock()
	if len(g.peers.byID) >= maxPeers {
		clear(g.peers.byID)
	}
	g.peers.byID[id] = peer{proxy: proxy, at: time.Now()}
	g.peers.mu.Unlock()
	return proxy
}
