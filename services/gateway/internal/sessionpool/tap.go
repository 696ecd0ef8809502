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

// sseTap passes an SSE body through unchanged and hands each
// notifications/progress event in it to onProgress, and each
// notifications/message event to the log sink of the request's context
// ([WithLogSink]) or else to onLog, as the event is read, before any later
// event of the stream (the call's answer) reaches the SDK. The SDK queues
// an incoming notification to a handler goroutine but hands a response to
// its caller at once, so a notification handled by the SDK's handler can
// be overtaken by the answer it preceded: the gateway would find the call
// over, and drop the progress or send the log message outside the call.
// Read on the SDK's stream goroutine, the tap keeps the server's order.
type sseTap struct {
	rc    io.ReadCloser
	hooks *tapHooks
	// req is the HTTP request whose response this is: a call's context
	// carries the call's log sink. (A pointer, not its context: the tap is
	// allocated per response, and stays in its size class.)
	req      *http.Request
	line     []byte
	overflow bool // the current line is longer than maxTappedLine
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
	n, err := t.rc.Read(p)
	chunk := p[:n]
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		part := chunk
		if i >= 0 {
			part = chunk[:i]
		}
		if !t.overflow {
			if len(t.line)+len(part) > maxTappedLine {
				t.overflow, t.line = true, t.line[:0]
			} else {
				t.line = append(t.line, part...)
			}
		}
		if i < 0 {
			break
		}
		if !t.overflow {
			t.event(bytes.TrimRight(t.line, "\r"))
		}
		t.line, t.overflow = t.line[:0], false
		chunk = chunk[i+1:]
	}
	return n, err
}

var (
	dataField      = []byte("data:")
	notifications  = []byte(`"notifications/`)
	progressMethod = []byte(`progress"`)
	logMethod      = []byte(`message"`)
)

// event handles one complete SSE line: one scan for the method names it
// acts on (as cheap as the progress check it replaced), and a decode only
// of a line that names one.
func (t *sseTap) event(line []byte) {
	data, ok := bytes.CutPrefix(line, dataField)
	if !ok || !names(data) {
		return
	}
	var msg struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(data, &msg) != nil || len(msg.Params) == 0 {
		return
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
			return
		}
		var p mcp.LoggingMessageParams
		if json.Unmarshal(msg.Params, &p) != nil {
			return
		}
		if sink != nil {
			sink(&p)
		} else {
			t.hooks.onLog(ctx, &p)
		}
	}
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
