package sessionpool

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxTappedLine bounds the SSE line the tap keeps to decode: a progress
// notification or a log message is far smaller; a longer line (a large
// result) passes through unkept, and a log message that long is not
// relayed (the bound on one relayed log message).
const maxTappedLine = 64 << 10

// maxHeldLine bounds the SSE line the tap holds back until its end (to
// mark a request, [MetaCall]): a longer line (a large result) is passed on
// as it comes, unheld, and a request that long is not marked.
const maxHeldLine = 1 << 20

// sseTap passes an SSE body through and hands each
// notifications/progress event in it to onProgress, and each
// notifications/message event to the log sink of the request's context
// ([WithLogSink]) or else to onLog, as the event is read, before any later
// event of the stream (the call's answer) reaches the SDK. The SDK queues
// an incoming notification to a handler goroutine but hands a response to
// its caller at once, so a notification handled by the SDK's handler can
// be overtaken by the answer it preceded: the gateway would find the call
// over, and drop the progress or send the log message outside the call.
// Read on the SDK's stream goroutine, the tap keeps the server's order.
//
// It changes one kind of line: a request the upstream sends on the stream
// of a request made under [WithCall] (elicitation, sampling, roots: asked
// during that call) gets the call's id in `_meta` ([MetaCall]), so the
// gateway knows which call asked, whatever else is in flight. Every other
// line passes byte for byte. Lines are held until their end (up to
// [maxHeldLine]); the SDK reads an event only once it is whole anyway.
type sseTap struct {
	rc    io.ReadCloser
	hooks *tapHooks
	// req is the HTTP request whose response this is: a call's context
	// carries the call's log sink and id. (A pointer, not its context: the
	// tap is allocated per response, and stays in its size class.)
	req      *http.Request
	line     []byte // the line being held
	out      []byte // what Read passes on, from off
	off      int
	err      error // the body's read error, passed on after out
	overflow bool  // the current line is longer than maxHeldLine: passed on as it comes
}

// tapHooks are what a session's taps hand messages to (one per session).
type tapHooks struct {
	onProgress func(context.Context, *mcp.ProgressNotificationParams)
	// onLog takes the log messages of a stream whose request carries no
	// sink (a caller's own session: its standalone stream); nil drops
	// them.
	onLog func(context.Context, *mcp.LoggingMessageParams)
}

func (t *sseTap) Read(p []byte) (int, error) {
	for t.off == len(t.out) {
		t.out, t.off = t.out[:0], 0
		if t.err != nil {
			if len(t.line) > 0 { // a last line without its end
				t.out, t.line = append(t.out, t.line...), t.line[:0]
				break
			}
			return 0, t.err
		}
		n, err := t.rc.Read(p)
		t.err = err
		t.feed(p[:n])
	}
	n := copy(p, t.out[t.off:])
	t.off += n
	return n, nil
}

// feed takes a chunk of the body: complete lines go to out (a request
// line marked), the rest is held.
func (t *sseTap) feed(chunk []byte) {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		part := chunk
		if i >= 0 {
			part = chunk[:i+1]
		}
		chunk = chunk[len(part):]
		if t.overflow {
			t.out = append(t.out, part...)
		} else if len(t.line)+len(part) > maxHeldLine {
			t.out = append(append(t.out, t.line...), part...)
			t.line, t.overflow = t.line[:0], true
		} else {
			t.line = append(t.line, part...)
		}
		if i < 0 {
			return
		}
		if !t.overflow {
			line := bytes.TrimRight(t.line[:len(t.line)-1], "\r")
			if marked := t.event(line); marked != nil {
				t.out = append(append(t.out, marked...), '\n')
			} else {
				t.out = append(t.out, t.line...)
			}
		}
		t.line, t.overflow = t.line[:0], false
	}
}

var (
	dataField      = []byte("data:")
	notifications  = []byte(`"notifications/`)
	progressMethod = []byte(`progress"`)
	logMethod      = []byte(`message"`)
)

// event handles one complete SSE line: one scan for the method names it
// acts on (as cheap as the progress check it replaced), and a decode only
// of a line that names one. It returns the line to pass on instead, when
// it marks a request ([MetaCall]); nil passes the line as it came.
func (t *sseTap) event(line []byte) []byte {
	data, ok := bytes.CutPrefix(line, dataField)
	if !ok {
		return nil
	}
	if call := callOf(t.req.Context()); call != "" && asks(data) {
		if marked := markCall(data, call); marked != nil {
			return marked
		}
	}
	if len(line) > maxTappedLine || !names(data) {
		return nil
	}
	var msg struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(data, &msg) != nil || len(msg.Params) == 0 {
		return nil
	}
	switch msg.Method {
	case "notifications/progress":
		var p mcp.ProgressNotificationParams
		if t.hooks.onProgress != nil && json.Unmarshal(msg.Params, &p) == nil {
			t.hooks.onProgress(context.Background(), &p)
		}
	case "notifications/message":
		ctx := t.req.Context()
		sink := logSinkOf(ctx)
		if sink == nil && t.hooks.onLog == nil {
			return nil
		}
		var p mcp.LoggingMessageParams
		if json.Unmarshal(msg.Params, &p) != nil {
			return nil
		}
		if sink != nil {
			sink(&p)
		} else {
			t.hooks.onLog(ctx, &p)
		}
	}
	return nil
}

// askMethods are the requests an upstream asks its client during a call.
var askMethods = [...][]byte{[]byte(`"elicitation/create"`), []byte(`"sampling/createMessage"`), []byte(`"roots/list"`)}

// asks reports whether data names one of [askMethods] (perhaps inside a
// string: the decode tells; a name escaped in JSON is not found, and its
// request is not marked: refused as asked outside any call).
func asks(data []byte) bool {
	for _, m := range askMethods {
		if bytes.Contains(data, m) {
			return true
		}
	}
	return false
}

// markCall returns the data line of the request data with `_meta`
// [MetaCall] set to call; nil when data is no such request.
func markCall(data []byte, call string) []byte {
	var msg map[string]json.RawMessage
	if json.Unmarshal(data, &msg) != nil || msg["id"] == nil {
		return nil
	}
	var method string
	if json.Unmarshal(msg["method"], &method) != nil || !asks([]byte(`"`+method+`"`)) {
		return nil
	}
	params := map[string]json.RawMessage{}
	if p := msg["params"]; len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		if json.Unmarshal(p, &params) != nil {
			return nil
		}
	}
	meta := map[string]json.RawMessage{}
	if m := params["_meta"]; len(m) > 0 && !bytes.Equal(m, []byte("null")) {
		if json.Unmarshal(m, &meta) != nil {
			return nil
		}
	}
	var err error
	if meta[MetaCall], err = json.Marshal(call); err != nil {
		return nil
	}
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return nil
	}
	if msg["params"], err = json.Marshal(params); err != nil {
		return nil
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return nil
	}
	return append([]byte("data: "), out...)
}

// names reports whether data names notifications/progress or
// notifications/message (perhaps inside a string: the decode tells).
func names(data []byte) bool {
	for rest := data; ; {
		i := bytes.Index(rest, notifications)
		if i < 0 {
			return false
		}
		rest = rest[i+len(notifications):]
		if bytes.HasPrefix(rest, progressMethod) || bytes.HasPrefix(rest, logMethod) {
			return true
		}
	}
}

func (t *sseTap) Close() error { return t.rc.Close() }

// MetaCall is the `_meta` key the gateway's tap puts on a request an
// upstream asks on the stream of a call made under [WithCall]: the call's
// id. The caller reads it with [CallOf] on the context [Caller.Handle]
// gets (it is removed from the request before). The id is the gateway's
// own random text, never sent upstream, so an upstream cannot name
// another call: a request without it (asked on the standalone stream, or
// marked by the upstream itself with an id it cannot know) names none.
const MetaCall = "dev.toolcrib/call"

type callKey struct{}

// WithCall returns ctx carrying a call's id: what the upstream asks on the
// stream of a request made under it is marked with id ([MetaCall]).
func WithCall(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callKey{}, id)
}

// CallOf is the call id ctx carries ([WithCall]), or "".
func CallOf(ctx context.Context) string { return callOf(ctx) }

func callOf(ctx context.Context) string {
	s, _ := ctx.Value(callKey{}).(string)
	return s
}

type logSinkKey struct{}

// WithLogSink returns ctx carrying sink: the log messages (MCP
// notifications/message) an HTTP upstream sends on the response stream
// of a request made under the returned context (a tools/call's) are handed
// to sink on the stream's reading goroutine, in the server's order, each
// before the call's answer is read; a message whose SSE line is longer
// than 64 KiB is not. Without a sink, a shared session drops the upstream's
// log messages.
func WithLogSink(ctx context.Context, sink func(*mcp.LoggingMessageParams)) context.Context {
	return context.WithValue(ctx, logSinkKey{}, sink)
}

func logSinkOf(ctx context.Context) func(*mcp.LoggingMessageParams) {
	s, _ := ctx.Value(logSinkKey{}).(func(*mcp.LoggingMessageParams))
	return s
}
