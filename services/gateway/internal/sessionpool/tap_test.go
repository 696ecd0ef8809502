package sessionpool

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tap passes the stream through byte for byte and hands on each
// progress notification and each log message exactly once, however the
// stream is cut into reads (one byte at a time here), with LF or CRLF line
// ends: a log message to the request's sink when its context carries one,
// else to onLog; a line longer than it keeps (a large result), other
// messages and a data line that only mentions a method are neither.
func TestProgressTap(t *testing.T) {
	big := `data: {"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"` + strings.Repeat("notifications/progress notifications/message ", 2000) + `"}]}}`
	bigLog := `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("x", maxTappedLine) + `"}}`
	stream := "event: message\r\n" +
		`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"a","progress":1,"total":2}}` + "\r\n\r\n" +
		`data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"l","data":"notifications/progress"}}` + "\n\n" +
		`data: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"notifications/message"}}` + "\n\n" +
		big + "\n\n" + bigLog + "\n\n" +
		`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"a","progress":2,"total":2,"message":"done"}}` + "\n\n" +
		`data: {"params":{"level":"error","data":{"k":1}},"method":"notifications/message","jsonrpc":"2.0"}` + "\r\n\r\n" +
		`data: {"jsonrpc":"2.0","id":1,"result":{}}` + "\n\n"
	for _, withSink := range []bool{false, true} {
		var got []*mcp.ProgressNotificationParams
		var sunk, other []*mcp.LoggingMessageParams
		ctx := context.Background()
		if withSink {
			ctx = WithLogSink(ctx, func(p *mcp.LoggingMessageParams) { sunk = append(sunk, p) })
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/mcp", nil)
		tap := &sseTap{rc: io.NopCloser(iotest.OneByteReader(strings.NewReader(stream))), req: req, hooks: &tapHooks{
			onProgress: func(_ context.Context, p *mcp.ProgressNotificationParams) { got = append(got, p) },
			onLog:      func(_ context.Context, p *mcp.LoggingMessageParams) { other = append(other, p) }}}
		out, err := io.ReadAll(tap)
		if err != nil || string(out) != stream {
			t.Fatalf("the stream changed (%v)", err)
		}
		if len(got) != 2 || got[0].Progress != 1 || got[1].Progress != 2 || got[1].Message != "done" || got[0].ProgressToken != "a" {
			t.Fatalf("progress %+v", got)
		}
		logs, none := other, sunk
		if withSink {
			logs, none = sunk, other
		}
		if len(none) != 0 || len(logs) != 2 || logs[0].Logger != "l" || logs[0].Data != "notifications/progress" || logs[1].Level != "error" {
			t.Fatalf("sink %v: logs %+v, elsewhere %+v", withSink, logs, none)
		}
	}
}

// BenchmarkProgressTap: what the tap adds to reading a small SSE answer
// (the benchmark's ping).
func BenchmarkProgressTap(b *testing.B) {
	answer := "event: message\nid: 1\ndata: " + `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"pong"}],"_meta":{}}}` + "\n\n"
	buf := make([]byte, 4096)
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
	hooks := &tapHooks{onProgress: func(context.Context, *mcp.ProgressNotificationParams) {}}
	for _, tapped := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "tapped"}[tapped], func(b *testing.B) {
			for b.Loop() {
				var r io.Reader = strings.NewReader(answer)
				if tapped {
					r = &sseTap{rc: io.NopCloser(r), req: req, hooks: hooks}
				}
				for {
					if _, err := r.Read(buf); err != nil {
						break
					}
				}
			}
		})
	}
}
