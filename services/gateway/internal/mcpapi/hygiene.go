package mcpapi

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// batchRefusal is the one answer to a POST whose body is a JSON-RPC batch
// (an array), whatever its length and protocol version: 2025-06-18 and
// later removed batching, and an older client may not make the gateway
// run (or answer) thousands of requests for one POST.
const batchRefusal = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"JSON-RPC batches are not supported: send one request per POST"}}`

// refuseBatches answers a POST whose body starts (after white space) with
// '[' with [batchRefusal] (HTTP 400) before it is decoded; others pass to h
// with the body unchanged.
func refuseBatches(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		br := bufio.NewReader(r.Body)
		if isBatch(br) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, batchRefusal)
			return
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{br, r.Body}
		h.ServeHTTP(w, r)
	})
}

// isBatch reports whether the first byte of br other than JSON white space
// is '[' (reading none of the message itself).
func isBatch(br *bufio.Reader) bool {
	for i := 1; ; i++ {
		b, err := br.Peek(i)
		if len(b) < i || err != nil {
			return false
		}
		switch b[i-1] {
		case ' ', '\t', '\r', '\n':
			if i == br.Size() {
				return false // a buffer of white space: not a request the SDK accepts either
			}
			continue
		case '[':
			return true
		default:
			return false
		}
	}
}

// CheckOrigin refuses (HTTP 403, before authentication and MCP) a request
// whose Origin header is neither one of allowed (scheme://host[:port],
// compared without regard to case) nor a loopback origin (http or https
// on localhost, 127.0.0.1 or ::1, any port): a web page on another site may
// not use the gateway unless the operator named its origin. A DNS
// rebinding page has a name of the attacker's, never a loopback one, and
// the Host check refuses its Host on a loopback listener. A request without
// Origin (not from a browser) passes; two Origin headers, or `null`, are
// refused.
func CheckOrigin(allowed []string, h http.Handler) http.Handler {
	set := make(map[string]bool, len(allowed))
	for _, o := range allowed {
		set[strings.ToLower(o)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if vs := r.Header.Values("Origin"); len(vs) > 0 && (len(vs) > 1 || !(set[strings.ToLower(vs[0])] || loopbackOrigin(vs[0]))) {
			http.Error(w, "Origin not allowed (--allowed-origins)", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackOrigin reports whether origin is http(s)://localhost,
// 127.0.0.1 or [::1], with any port and nothing else.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	switch strings.ToLower(u.Hostname()) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// sseRetry is the reconnection delay the gateway asks of a client whose
// POST SSE stream ends before its answer (MCP 2025-11-25, SEP-1699).
const sseRetry = 2 * time.Second

// primeEvent starts the priming event the SDK writes first on a POST SSE
// stream of a session with an event store (an id and empty data; the
// client resumes from it with Last-Event-ID).
const primeEvent = "event: prime\n"

// withSSERetry adds the retry field (sseRetry) to the priming event of a
// session's POST SSE streams, as SEP-1699 asks: the SDK sends one only in
// the close event of a stream a handler ends early, so a client whose
// stream breaks for another reason would not know when to reconnect.
// Everything else is written unchanged.
func withSSERetry(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&retryWriter{ResponseWriter: w}, r)
	})
}

// retryWriter rewrites the first write of an SSE response when it is the
// priming event.
type retryWriter struct {
	http.ResponseWriter
	wrote bool
}

func (rw *retryWriter) Write(b []byte) (int, error) {
	if rw.wrote {
		return rw.ResponseWriter.Write(b)
	}
	rw.wrote = true
	if !strings.HasPrefix(rw.Header().Get("Content-Type"), "text/event-stream") || !bytes.HasPrefix(b, []byte(primeEvent)) {
		return rw.ResponseWriter.Write(b)
	}
	out := make([]byte, 0, len(b)+32)
	out = append(out, primeEvent...)
	out = append(out, "retry: "+strconv.FormatInt(sseRetry.Milliseconds(), 10)+"\n"...)
	out = append(out, b[len(primeEvent):]...)
	if _, err := rw.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Unwrap lets http.ResponseController reach the writer's Flush.
func (rw *retryWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }
