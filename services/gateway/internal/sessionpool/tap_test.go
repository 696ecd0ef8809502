package sessionpool

import (
	"context"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tap passes the stream through byte for byte and hands on each
// progress notification exactly once, however the stream is cut into
// reads (one byte at a time here), with LF or CRLF line ends; a line
// longer than it keeps (a large result), other messages and a data line
// that only mentions the method are not progress.
func TestProgressTap(t *testing.T) {
	big := `data: {"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"` + strings.Repeat("notifications/progress ", 5000) + `"}]}}`
	stream := "event: message\r\n" +
		`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"a","progress":1,"total":2}}` + "\r\n\r\n" +
		`data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"notifications/progress"}}` + "\n\n" +
		big + "\n\n" +
		`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"a","progress":2,"total":2,"message":"done"}}` + "\n\n" +
		`data: {"jsonrpc":"2.0","id":1,"result":{}}` + "\n\n"
	var got []*mcp.ProgressNotificationParams
	tap := &progressTap{rc: io.NopCloser(iotest.OneByteReader(strings.NewReader(stream))),
		onProgress: func(_ context.Context, p *mcp.ProgressNotificationParams) { got = append(got, p) }}
	out, err := io.ReadAll(tap)
	if err != nil || string(out) != stream {
		t.Fatalf("the stream changed (%v)", err)
	}
	if len(got) != 2 || got[0].Progress != 1 || got[1].Progress != 2 || got[1].Message != "done" || got[0].ProgressToken != "a" {
		t.Fatalf("progress %+v", got)
	}
}

// BenchmarkProgressTap: what the tap adds to reading a small SSE answer
// (the benchmark's ping).
func BenchmarkProgressTap(b *testing.B) {
	answer := "event: message\nid: 1\ndata: " + `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"pong"}],"_meta":{}}}` + "\n\n"
	buf := make([]byte, 4096)
	for _, tapped := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "tapped"}[tapped], func(b *testing.B) {
			for b.Loop() {
				var r io.Reader = strings.NewReader(answer)
				if tapped {
					r = &progressTap{rc: io.NopCloser(r), onProgress: func(context.Context, *mcp.ProgressNotificationParams) {}}
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
