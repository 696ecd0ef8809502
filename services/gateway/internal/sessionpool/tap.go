package sessionpool

import (
	"bytes"
	"context"
	"encoding/json"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxTappedLine bounds the SSE line the progress tap keeps to decode: a
// progress notification is far smaller; a longer line (a large result)
// passes through unkept.
const maxTappedLine = 64 << 10

// progressTap passes an SSE body through unchanged and hands each
// notifications/progress event in it to onProgress as the event is read,
// before any later event of the stream (the call's answer) reaches the
// SDK. The SDK queues an incoming notification to a handler goroutine but
// hands a response to its caller at once, so a progress notification
// handled by the SDK's handler can be overtaken by the answer it preceded:
// the gateway would find the call over and drop it. Read on the SDK's
// stream goroutine, the tap keeps the server's order.
type progressTap struct {
	rc         io.ReadCloser
	onProgress func(context.Context, *mcp.ProgressNotificationParams)
	line       []byte
	overflow   bool // the current line is longer than maxTappedLine
}

func (t *progressTap) Read(p []byte) (int, error) {
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

// event handles one complete SSE line.
func (t *progressTap) event(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"notifications/progress"`)) {
		return
	}
	var msg struct {
		Method string                          `json:"method"`
		Params *mcp.ProgressNotificationParams `json:"params"`
	}
	if json.Unmarshal(data, &msg) != nil || msg.Method != "notifications/progress" || msg.Params == nil {
		return
	}
	t.onProgress(context.Background(), msg.Params)
}

func (t *progressTap) Close() error { return t.rc.Close() }
