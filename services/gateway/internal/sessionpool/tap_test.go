package sessionpool

import (
	"context"
	"encoding/json"
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

// On the stream of a request made under WithCall, the tap marks each
// request the upstream asks (elicitation, sampling, roots) with the call's
// id in `_meta`, replacing one the upstream put there and keeping the
// rest of `_meta`, however the stream is cut into reads; every other line
// passes byte for byte: notifications (even one naming a request method in
// its data), results, and a request whose method is escaped in its JSON
// (it goes unmarked, so it is refused as asked outside any call). Without
// WithCall nothing changes.
func TestTapMarksTheRequestsACallAsks(t *testing.T) {
	elicit := `data: {"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object"}}}`
	sample := `data: {"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{"_meta":{"dev.toolcrib/call":"forged","k":"v"},"maxTokens":5,"messages":[]}}`
	roots := `data: {"jsonrpc":"2.0","id":3,"method":"roots/list"}`
	plain := `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"roots/list"}}` + "\r\n\r\n" +
		`data: {"jsonrpc":"2.0","id":4,"method":"elicitation\/create","params":{"message":"escaped"}}` + "\n\n" +
		`data: {"jsonrpc":"2.0","id":9,"result":{"content":[]}}` + "\n\n"
	stream := "event: message\n" + elicit + "\n\n" + sample + "\r\n\r\n" + roots + "\n\n" + plain
	read := func(ctx context.Context) string {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/mcp", nil)
		tap := &sseTap{rc: io.NopCloser(iotest.OneByteReader(strings.NewReader(stream))), req: req, hooks: &tapHooks{}}
		out, err := io.ReadAll(tap)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if got := read(context.Background()); got != stream {
		t.Fatalf("without a call the stream changed:\n%s", got)
	}
	got := read(WithCall(context.Background(), "call-1"))
	if !strings.HasSuffix(got, plain) {
		t.Fatalf("the lines after the requests changed:\n%s", got)
	}
	lines := strings.Split(strings.TrimSuffix(got, plain), "\n")
	var asked []map[string]any
	for _, l := range lines {
		data, ok := strings.CutPrefix(l, "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		asked = append(asked, m)
	}
	if len(asked) != 3 {
		t.Fatalf("%d requests, want 3:\n%s", len(asked), got)
	}
	for i, want := range []string{"elicitation/create", "sampling/createMessage", "roots/list"} {
		m := asked[i]
		meta, _ := m["params"].(map[string]any)["_meta"].(map[string]any)
		if m["method"] != want || meta[MetaCall] != "call-1" {
			t.Fatalf("request %d: %v, want %s marked call-1", i, m, want)
		}
	}
	if meta := asked[1]["params"].(map[string]any)["_meta"].(map[string]any); meta["k"] != "v" || asked[1]["id"] != "s" {
		t.Fatalf("the sampling request's own _meta or id was not kept: %v", asked[1])
	}
}
