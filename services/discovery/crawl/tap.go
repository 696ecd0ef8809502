package crawl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// methodToolsList and notificationToolsListChanged are the MCP names the tap
// watches for.
const (
	methodToolsList              = "tools/list"
	notificationToolsListChanged = "notifications/tools/list_changed"
	methodSubscriptionsListen    = "subscriptions/listen"
)

// errMessageTooLarge is returned by a tapped HTTP body when one message is
// larger than the scan's byte cap allows.
var errMessageTooLarge = errors.New("crawl: message larger than the byte cap")

// tap sees every JSON-RPC message of one session in wire order, below the
// go-sdk's typed decoding:
//
//   - it captures the raw `result` bytes of the crawl's own tools/list calls,
//     so tools keep every field exactly as sent (the SDK's typed mcp.Tool drops
//     unknown fields, and its ListToolsResult cannot tell an empty nextCursor
//     from an absent one);
//   - it counts `notifications/tools/list_changed` at the moment the message
//     is read off the wire, so a notification that precedes a page's response
//     on the wire is always seen before that response is used.
//
// The crawl issues one tools/list at a time per session: [tap.arm] marks
// the next outgoing tools/list as the crawl's call.
type tap struct {
	limit int64 // largest message accepted, bytes

	mu      sync.Mutex
	armed   *call // the next tools/list written becomes this call
	pending map[any]*call

	changed   atomic.Int64
	changedCh chan struct{} // receives (non-blocking) on every list_changed
	overflow  atomic.Bool
	tooDeep   atomic.Bool // a message nested beyond MaxMessageDepth

	listenEnded chan struct{} // closed when a subscriptions/listen stream ended
	listenOnce  sync.Once
}

// call is one tools/list request of the crawl.
type call struct {
	mu       sync.Mutex
	sent     bool
	answered bool
	result   json.RawMessage
	err      *jsonrpc.Error
}

func newTap(limit int64) *tap {
	return &tap{limit: limit, pending: map[any]*call{}, changedCh: make(chan struct{}, 1), listenEnded: make(chan struct{})}
}

// arm prepares the capture of the next tools/list request.
func (t *tap) arm() *call {
	c := &call{}
	t.mu.Lock()
	t.armed = c
	t.mu.Unlock()
	return c
}

// disarm forgets the call (after it returned).
func (t *tap) disarm(c *call) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.armed == c {
		t.armed = nil
	}
	for id, p := range t.pending {
		if p == c {
			delete(t.pending, id)
		}
	}
}

// outgoing registers an outgoing request as the armed call's.
func (t *tap) outgoing(req *jsonrpc.Request) {
	if req.Method != methodToolsList || !req.IsCall() {
		return
	}
	t.mu.Lock()
	c := t.armed
	t.armed = nil
	if c != nil {
		t.pending[req.ID.Raw()] = c
	}
	t.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	c.sent = true
	c.mu.Unlock()
}

// stubResult replaces a captured tools/list result before the go-sdk sees
// it: the crawl uses only the raw bytes, and decoding (and re-validating)
// every tool twice would double the cost of a large catalog.
var stubResult = json.RawMessage(`{"tools":[]}`)

// observe looks at one incoming message and reports whether it was the
// answer to one of the crawl's own tools/list calls (whose result the
// caller then replaces with [stubResult]).
func (t *tap) observe(msg jsonrpc.Message) (captured bool) {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.Method == notificationToolsListChanged {
			t.changed.Add(1)
			select {
			case t.changedCh <- struct{}{}:
			default:
			}
		}
	case *jsonrpc.Response:
		t.mu.Lock()
		c := t.pending[m.ID.Raw()]
		delete(t.pending, m.ID.Raw())
		t.mu.Unlock()
		if c == nil {
			return false
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.answered = true
		if m.Error != nil {
			var we *jsonrpc.Error
			if errors.As(m.Error, &we) {
				c.err = we
			} else {
				c.err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: m.Error.Error()}
			}
			return false
		}
		c.result = m.Result
		return true
	}
	return false
}

// outcome returns what the server answered to the call.
func (c *call) outcome() (sent, answered bool, result json.RawMessage, werr *jsonrpc.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent, c.answered, c.result, c.err
}

// --- any go-sdk transport: wrap the connection ---

// tapTransport wraps a go-sdk transport whose connections the client session
// does not need to update (stdio, in-memory, IO): every message passes the
// tap. Streamable HTTP connections must not be wrapped (the session updates
// them with the negotiated version and starts their standalone SSE stream);
// they are tapped at the HTTP layer by [tapRoundTripper].
type tapTransport struct {
	inner mcp.Transport
	tap   *tap
}

func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tapConn{Connection: c, tap: t.tap}, nil
}

type tapConn struct {
	mcp.Connection
	tap *tap
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil && c.tap.observe(msg) {
		cp := *msg.(*jsonrpc.Response)
		cp.Result = stubResult
		msg = &cp
	}
	return msg, err
}

func (c *tapConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok {
		c.tap.outgoing(req)
	}
	return c.Connection.Write(ctx, msg)
}

// --- streamable HTTP: tap request and response bodies ---

// tapRoundTripper sees every HTTP exchange of a streamable HTTP session: it
// registers outgoing tools/list requests, adds the
// upstream credential, and hands response bodies to the tap as the SDK
// reads them.
type tapRoundTripper struct {
	base       http.RoundTripper
	tap        *tap
	credential string
}

func (rt *tapRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if rt.credential != "" {
		req.Header.Set("Authorization", "Bearer "+rt.credential)
	}
	listen := false
	if req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		if r, ok := outgoingRequest(body); ok {
			rt.tap.outgoing(r)
			listen = r.Method == methodSubscriptionsListen
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := rt.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		resp.Body = &tapBody{rc: resp.Body, tap: rt.tap}
	case "text/event-stream":
		resp.Body = &tapBody{rc: resp.Body, tap: rt.tap, sse: true, listen: listen}
	}
	return resp, nil
}

// outgoingRequest reads the method and id of a request the session's own
// client wrote (never a peer's message: those go through
// jsonrpc.DecodeMessage). The go-sdk's decoder allocates a 32 KiB buffer per
// message, which for these few-hundred-byte requests was most of the
// garbage a fleet crawl made; encoding/json reads them in place. Batches
// and responses are not requests (false).
func outgoingRequest(body []byte) (*jsonrpc.Request, bool) {
	var w struct {
		Method *string `json:"method"`
		ID     any     `json:"id"`
	}
	if err := json.Unmarshal(body, &w); err != nil || w.Method == nil {
		return nil, false
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, false
	}
	return &jsonrpc.Request{Method: *w.Method, ID: id}, true
}

// tapBody shows a response body to the tap before the SDK reads it, and
// hands the SDK the body with the crawl's own tools/list results replaced by
// [stubResult]. An application/json body is one message (or batch) and is
// held until it is complete; a text/event-stream body is passed on event by
// event, each held until its blank line (the SDK dispatches events only
// then, too).
type tapBody struct {
	rc    io.ReadCloser
	tap   *tap
	sse   bool
	in    []byte  // bytes read, not yet a whole message / line
	event []byte  // SSE: raw lines of the current event
	data  []byte  // SSE: data of the current event
	out   []byte  // ready for the SDK
	eof   error   // the underlying body's end (io.EOF or an error)
	scr   *[]byte // read buffer from scratchPool, until eof
	meter depthMeter
	// listen: the body is a subscriptions/listen stream; its end closes
	// tap.listenEnded.
	listen bool
}

func (b *tapBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.eof != nil {
			return 0, b.eof
		}
		if b.scr == nil {
			b.scr = scratchPool.Get().(*[]byte)
		}
		n, err := b.rc.Read(*b.scr)
		if n > 0 {
			if ferr := b.feed((*b.scr)[:n]); ferr != nil {
				b.end(ferr)
				return 0, ferr
			}
		}
		if err != nil {
			if !b.sse && err == io.EOF && len(b.in) > 0 {
				b.out = append(b.out, b.rewrite(b.in)...)
				b.in = nil
			} else if b.sse {
				// An unterminated last event is passed on as it came.
				b.out = append(b.out, b.event...)
				b.out = append(b.out, b.in...)
				b.in, b.event = nil, nil
			}
			b.end(err)
			if b.listen {
				b.tap.listenOnce.Do(func() { close(b.tap.listenEnded) })
			}
		}
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

// scratchPool holds the read buffers of tapped bodies: every page of every
// scan is one response body, and a fresh 32 KiB buffer each was a good part
// of a fleet crawl's garbage.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// end records the body's end and gives the read buffer back (only Read
// uses it, and Read never reads again after the end; feed copies what it
// keeps).
func (b *tapBody) end(err error) {
	b.eof = err
	if b.scr != nil {
		scratchPool.Put(b.scr)
		b.scr = nil
	}
}

func (b *tapBody) Close() error { return b.rc.Close() }

// rewrite shows one JSON text (message or batch) to the tap and returns it,
// with captured results replaced.
func (b *tapBody) rewrite(data []byte) []byte {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return data
	}
	if trimmed[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(trimmed, &batch); err != nil {
			return data
		}
		changed := false
		for i, m := range batch {
			if out, ok := b.rewriteOne(m); ok {
				batch[i], changed = out, true
			}
		}
		if !changed {
			return data
		}
		out, err := json.Marshal(batch)
		if err != nil {
			return data
		}
		return out
	}
	if out, ok := b.rewriteOne(trimmed); ok {
		return out
	}
	return data
}

func (b *tapBody) rewriteOne(data []byte) ([]byte, bool) {
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil || !b.tap.observe(msg) {
		return nil, false
	}
	cp := *msg.(*jsonrpc.Response)
	cp.Result = stubResult
	out, err := jsonrpc.EncodeMessage(&cp)
	return out, err == nil
}

func (b *tapBody) feed(p []byte) error {
	if !b.sse {
		if b.meter.feed(p) {
			b.tap.tooDeep.Store(true)
		}
		b.in = append(b.in, p...)
		if int64(len(b.in)) > b.tap.limit {
			b.tap.overflow.Store(true)
			return errMessageTooLarge
		}
		return nil
	}
	b.in = append(b.in, p...)
	for {
		i := bytes.IndexAny(b.in, "\r\n")
		if i < 0 {
			if int64(len(b.in)) > b.tap.limit {
				b.tap.overflow.Store(true)
				return errMessageTooLarge
			}
			return nil
		}
		end := i + 1
		if b.in[i] == '\r' {
			if i+1 == len(b.in) {
				return nil // wait: this may be the first half of "\r\n"
			}
			if b.in[i+1] == '\n' {
				end = i + 2
			}
		}
		line, raw := b.in[:i], b.in[:end]
		if err := b.line(line, raw); err != nil {
			return err
		}
		b.in = b.in[end:]
	}
}

// line handles one SSE line; raw includes its line end.
func (b *tapBody) line(l, raw []byte) error {
	if len(l) == 0 { // the end of an event
		b.event = append(b.event, raw...)
		b.meter.reset()
		if len(b.data) > 0 {
			if out := b.rewrite(b.data); !bytes.Equal(out, b.data) {
				b.event = rebuildEvent(b.event, out)
			}
		}
		b.out = append(b.out, b.event...)
		b.event, b.data = b.event[:0:0], b.data[:0]
		return nil
	}
	b.event = append(b.event, raw...)
	field, value, _ := bytes.Cut(l, []byte(":"))
	if string(field) != "data" {
		return nil // event, id, retry, comments
	}
	value = bytes.TrimPrefix(value, []byte(" "))
	if len(b.data) > 0 {
		b.data = append(b.data, '\n')
	}
	if b.meter.feed(value) {
		b.tap.tooDeep.Store(true)
	}
	b.data = append(b.data, value...)
	if int64(len(b.data)) > b.tap.limit {
		b.tap.overflow.Store(true)
		return errMessageTooLarge
	}
	return nil
}

// rebuildEvent keeps an event's non-data lines and replaces its data.
func rebuildEvent(event, data []byte) []byte {
	var out []byte
	for _, l := range bytes.SplitAfter(event, []byte("\n")) {
		trimmed := bytes.TrimRight(l, "\r\n")
		if len(trimmed) == 0 || bytes.HasPrefix(trimmed, []byte("data")) {
			continue
		}
		out = append(out, l...)
	}
	out = append(out, "data: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}

// String makes a tap readable in test failures.
func (t *tap) String() string {
	return fmt.Sprintf("tap{list_changed=%d overflow=%v}", t.changed.Load(), t.overflow.Load())
}
