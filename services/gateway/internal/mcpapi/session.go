package mcpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionHeader is the streamable HTTP transport's session header
// (2025-03-26 to 2025-11-25).
const sessionHeader = "Mcp-Session-Id"

// protocolHeader is the protocol version header a client sends after
// initialization (2025-06-18 and later) and on every 2026-07-28 request.
const protocolHeader = "Mcp-Protocol-Version"

// statelessFrom is the first protocol version whose requests are each
// whole on their own (no initialize, no session): the stateless endpoint
// serves it.
const statelessFrom = "2026-07-28"

// maxInitializePeek bounds how much of a POST without a session is read
// to tell an initialize request from others: an initialize request is a
// few kilobytes; a longer body is never one and goes to the stateless
// endpoint unread.
const maxInitializePeek = 64 << 10

// route sends each request to the endpoint that serves its protocol:
//   - a request naming 2026-07-28 or later (its protocol header) goes to
//     the stateless endpoint, session header or not;
//   - a request with a session header, a GET (standalone stream) and a
//     DELETE (end of session) go to the stateful endpoint, which refuses
//     a session it does not hold (404) and a session another principal
//     opened (403);
//   - a POST without a session goes to the stateful endpoint when it is an
//     initialize request (the client gets a session: the gateway can then
//     ask it to confirm, and relay what upstreams send it), else to the
//     stateless endpoint (an old-protocol request without initialize is
//     answered on its own, as before sessions existed).
func route(stateless, stateful http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get(protocolHeader); v >= statelessFrom {
			stateless.ServeHTTP(w, r)
			return
		}
		if r.Header.Get(sessionHeader) != "" || r.Method == http.MethodGet || r.Method == http.MethodDelete {
			stateful.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodPost && r.Body != nil && isInitialize(r) {
			stateful.ServeHTTP(w, r)
			return
		}
		stateless.ServeHTTP(w, r)
	})
}

// isInitialize reports whether r's body is one JSON-RPC initialize
// request, leaving the body to be read again whole.
func isInitialize(r *http.Request) bool {
	br, ok := r.Body.(interface{ Peek(int) ([]byte, error) })
	if !ok {
		b := bufio.NewReaderSize(r.Body, maxInitializePeek)
		r.Body = struct {
			io.Reader
			io.Closer
		}{b, r.Body}
		br = b
	}
	head, _ := br.Peek(maxInitializePeek)
	var msg struct {
		Method string `json:"method"`
	}
	// A body longer than the peek does not decode: not an initialize.
	if json.Unmarshal(bytes.TrimSpace(head), &msg) != nil {
		return false
	}
	return msg.Method == "initialize"
}

// canElicit reports whether the client of ss holds a session over which
// the gateway can send it a request and get the answer (a stateful
// session, not the per-request one of the stateless endpoint), and
// declared the elicitation capability (form mode) at initialize.
func canElicit(ss *mcp.ServerSession) bool {
	if ss == nil || ss.ID() == "" {
		return false
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.ProtocolVersion >= statelessFrom || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return false
	}
	e := ip.Capabilities.Elicitation
	// An empty elicitation capability means form mode (2025-11-25).
	return e.Form != nil || e.URL == nil
}
