package crawl

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzParsePage: a tools/list result from a server is outside input.
func FuzzParsePage(f *testing.F) {
	for _, s := range []string{`{"tools":[]}`, `{"tools":[{"name":"a"}],"nextCursor":""}`, `{"tools":[1,"x",null],"_meta":{"dev.toolcrib/catalog-revision":7}}`,
		`{"tools":null}`, `[]`, `{"tools":[],"nextCursor":null,"cacheScope":5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePage(b)
		if err != nil {
			return
		}
		if p.bytes != int64(len(b)) {
			t.Fatalf("bytes %d of %d", p.bytes, len(b))
		}
		d, tools := digestPage(p.tools, 0, true, nil)
		if len(tools) != len(p.tools) || d == "" {
			t.Fatalf("%d tools digested of %d", len(tools), len(p.tools))
		}
	})
}

// FuzzTapBodyPassesStreamsThrough: what the SDK reads from a tapped body is
// exactly what the server sent, whatever the framing, unless it carries one
// of the crawl's own answers.
func FuzzTapBodyPassesStreamsThrough(f *testing.F) {
	for _, s := range []string{"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n",
		"data: a\r\ndata: b\r\n\r\n: comment\rid: 7\r\rdata: x", "\r", "data:\n\n\n", `{"jsonrpc":"2.0","id":1,"result":{}}`} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, sse bool) {
		tp := newTap(1 << 20)
		body := &tapBody{rc: io.NopCloser(iotest.OneByteReader(bytes.NewReader(in))), tap: tp, sse: sse}
		out, err := io.ReadAll(body)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("stream changed:\n in %q\nout %q", in, out)
		}
	})
}

// TestTapBodyStubsTheCrawlsOwnAnswer checks the one rewrite the tap makes.
func TestTapBodyStubsTheCrawlsOwnAnswer(t *testing.T) {
	tp := newTap(1 << 20)
	c := tp.arm()
	req := json.RawMessage(`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}`)
	msg := mustDecode(t, req)
	tp.outgoing(msg)
	stream := "id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"tools\":[{\"name\":\"a\",\"x\":1}]}}\n\n"
	body := &tapBody{rc: io.NopCloser(iotest.HalfReader(bytes.NewReader([]byte(stream)))), tap: tp, sse: true}
	out, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"result":{"tools":[]}`)) || !bytes.HasPrefix(out, []byte("id: 1\nevent: message\n")) {
		t.Fatalf("rewritten stream %q", out)
	}
	_, answered, raw, _ := c.outcome()
	if !answered || string(raw) != `{"tools":[{"name":"a","x":1}]}` {
		t.Fatalf("captured %v %s", answered, raw)
	}
}

func mustDecode(t *testing.T, b []byte) *jsonrpcRequest {
	t.Helper()
	m, err := decodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
