package discoverytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Reply is the answer to one tools/list.
type Reply struct {
	// Result is the raw result object; ignored when Error is set.
	Result json.RawMessage
	// Error is a JSON-RPC error to answer with instead.
	Error *jsonrpc.Error
	// NotifyBefore sends `notifications/tools/list_changed` on the same
	// stream right before the answer (deterministic wire order).
	NotifyBefore bool
	// Wait, when set, holds the answer until it is closed (or the request
	// ends).
	Wait <-chan struct{}
}

// Lister answers tools/list requests. call counts requests from 0; cursor is
// nil when the request carried none (an explicit `"cursor": ""` is a
// non-nil empty string).
type Lister interface {
	List(call int, cursor *string) Reply
}

// ListerFunc adapts a function to [Lister].
type ListerFunc func(call int, cursor *string) Reply

// List implements [Lister].
func (f ListerFunc) List(call int, cursor *string) Reply { return f(call, cursor) }

// ServerOptions configure a test MCP server.
type ServerOptions struct {
	// Versions restricts the protocol versions the server speaks; nil means
	// every version the go-sdk supports.
	Versions []string
	// Token, when set, is the bearer token an HTTP server requires.
	Token string
	// Stateless serves HTTP statelessly; the go-sdk speaks 2026-07-28 over
	// HTTP only then.
	Stateless bool
	// NotifyOnSessionStart answers each session's first tools/list as if
	// its Reply had NotifyBefore: a server whose tools change as a
	// session starts and that announces it (server-everything registers
	// tools on notifications/initialized), with the notification ordered
	// before the answer. Over stateless HTTP every request is a session's
	// first.
	NotifyOnSessionStart bool
}

// Server is a go-sdk MCP server whose tools/list is answered by a Lister
// (every other method is the go-sdk's own).
type Server struct {
	// MCP is the go-sdk server; Notify uses it.
	MCP           *mcp.Server
	lister        Lister
	notifyOnStart bool
	started       sync.Map // HTTP session ids that listed ([ServerOptions.NotifyOnSessionStart])
	calls         atomic.Int64
	notes         atomic.Int64
}

// NewServer returns a server answering tools/list with l.
func NewServer(l Lister, o ServerOptions) *Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "discoverytest", Version: "v1"}, &mcp.ServerOptions{
		Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		SupportedProtocolVersions: o.Versions,
	})
	return &Server{MCP: s, lister: l, notifyOnStart: o.NotifyOnSessionStart}
}

// Calls is the number of tools/list requests answered or being answered.
func (s *Server) Calls() int { return int(s.calls.Load()) }

// Notify makes the go-sdk server send `notifications/tools/list_changed` to
// every connected session (on the standalone stream over HTTP, after the
// go-sdk's 10 ms debounce).
func (s *Server) Notify() {
	n := s.notes.Add(1)
	s.MCP.AddTool(&mcp.Tool{Name: fmt.Sprintf("notify_%d", n), InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
}

// answer runs the lister for one request.
func (s *Server) answer(params json.RawMessage) Reply {
	call := int(s.calls.Add(1) - 1)
	var p map[string]json.RawMessage
	_ = json.Unmarshal(params, &p)
	var cursor *string
	if raw, ok := p["cursor"]; ok && string(raw) != "null" {
		var c string
		if json.Unmarshal(raw, &c) == nil {
			cursor = &c
		}
	}
	return s.lister.List(call, cursor)
}

func listChangedNotification() *jsonrpc.Request {
	return &jsonrpc.Request{Method: "notifications/tools/list_changed", Params: json.RawMessage(`{}`)}
}

func response(id jsonrpc.ID, r Reply) *jsonrpc.Response {
	if r.Error != nil {
		return &jsonrpc.Response{ID: id, Error: r.Error}
	}
	return &jsonrpc.Response{ID: id, Result: r.Result}
}

// Transport wraps a server-side go-sdk transport so that tools/list requests
// are answered by the server's Lister; use it with [mcp.Server.Connect].
func (s *Server) Transport(inner mcp.Transport) mcp.Transport {
	return &listerTransport{inner: inner, s: s}
}

type listerTransport struct {
	inner mcp.Transport
	s     *Server
}

func (t *listerTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &listerConn{Connection: c, s: t.s}, nil
}

type listerConn struct {
	mcp.Connection
	s      *Server
	listed atomic.Bool // a tools/list was answered on this connection
	mu     sync.Mutex  // orders a notification and its answer on the stream
}

func (c *listerConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || req.Method != "tools/list" || !req.IsCall() {
			return msg, nil
		}
		r := c.s.answer(req.Params)
		if c.s.notifyOnStart && c.listed.CompareAndSwap(false, true) {
			r.NotifyBefore = true
		}
		go func() {
			if r.Wait != nil {
				select {
				case <-r.Wait:
				case <-ctx.Done():
					return
				}
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if r.NotifyBefore {
				_ = c.Connection.Write(context.Background(), listChangedNotification())
			}
			_ = c.Connection.Write(context.Background(), response(req.ID, r))
		}()
	}
}

// NewInMemory runs the server over go-sdk in-memory transports and returns
// the client side. The server stops when the test ends.
func NewInMemory(t testing.TB, l Lister, o ServerOptions) (mcp.Transport, *Server) {
	t.Helper()
	s := NewServer(l, o)
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		ss, err := s.MCP.Connect(ctx, s.Transport(st), nil)
		if err != nil {
			return
		}
		<-ctx.Done()
		_ = ss.Close()
	}()
	return ct, s
}

// HTTPServer is a test server over real streamable HTTP on loopback.
type HTTPServer struct {
	*Server
	// HTTP is the loopback server; URL is its MCP endpoint.
	HTTP *httptest.Server
	URL  string
	// Requests counts every HTTP request received.
	Requests atomic.Int64
	// Authorized counts requests that carried the required token.
	Authorized atomic.Int64
}

// NewHTTP serves the server over streamable HTTP on a loopback port (TLS
// when tls is true; the client then needs HTTP.Certificate() as a root).
func NewHTTP(t testing.TB, l Lister, o ServerOptions, tls bool) *HTTPServer {
	t.Helper()
	s := NewServer(l, o)
	h := &HTTPServer{Server: s}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.MCP }, &mcp.StreamableHTTPOptions{Stateless: o.Stateless})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Requests.Add(1)
		if o.Token != "" {
			if r.Header.Get("Authorization") != "Bearer "+o.Token {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.Authorized.Add(1)
		}
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if msg, err := jsonrpc.DecodeMessage(body); err == nil {
				if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" && req.IsCall() {
					h.serveList(w, r, req)
					return
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sdk.ServeHTTP(w, r)
	})
	h.HTTP = httptest.NewUnstartedServer(handler)
	h.HTTP.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	if tls {
		h.HTTP.StartTLS()
	} else {
		h.HTTP.Start()
	}
	h.URL = h.HTTP.URL + "/mcp"
	t.Cleanup(func() {
		// A client's listening stream (standalone SSE, subscriptions/listen)
		// stays open: drop it, as a server going away would, rather than
		// wait for it.
		h.HTTP.CloseClientConnections()
		h.HTTP.Close()
	})
	return h
}

func (h *HTTPServer) serveList(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) {
	rep := h.answer(req.Params)
	if h.notifyOnStart {
		id := r.Header.Get("Mcp-Session-Id")
		if _, listed := h.started.LoadOrStore(id, true); !listed || id == "" {
			rep.NotifyBefore = true
		}
	}
	if rep.Wait != nil {
		select {
		case <-rep.Wait:
		case <-r.Context().Done():
			return
		}
	}
	resp, err := jsonrpc.EncodeMessage(response(req.ID, rep))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if rep.Error == nil {
		// Write the result verbatim (the JSON-RPC encoder would compact it),
		// so tests can check that raw bytes survive.
		id, _ := json.Marshal(req.ID.Raw())
		resp = []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, rep.Result))
	}
	if !rep.NotifyBefore {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(resp)
		return
	}
	note, _ := jsonrpc.EncodeMessage(listChangedNotification())
	w.Header().Set("Content-Type", "text/event-stream")
	var b strings.Builder
	fmt.Fprintf(&b, "event: message\ndata: %s\n\n", note)
	fmt.Fprintf(&b, "event: message\ndata: %s\n\n", resp)
	_, _ = io.WriteString(w, b.String())
}
