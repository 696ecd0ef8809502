package gateway_test

import (
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestTheSDKDecodesAMessageInPlace keeps the first change toolcrib carries
// to the go-sdk (third_party/go-sdk/README.md): its JSON decoding parses a
// message where it lies. Upstream, every message, result and _meta the SDK
// decodes is first copied into a Decoder's own zeroed 32 KiB buffer:
// bench-gateway's process allocated 3,361 MB upstream and 510 MB with the
// change, and the bare tools/list crawl of bench-discovery's floor used
// less than half the CPU.
func TestTheSDKDecodesAMessageInPlace(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ping","arguments":{"n":1},"_meta":{"progressToken":"p"}}}`)
	res := []byte(`{"content":[{"type":"text","text":"pong"}],"structuredContent":{"ok":true},"_meta":{"k":"v"}}`)
	const rounds = 200
	decode := func() {
		m, err := jsonrpc.DecodeMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := m.(*jsonrpc.Request); !ok || r.Method != "tools/call" {
			t.Fatalf("decoded %#v", m)
		}
		var out mcp.CallToolResult
		if err := out.UnmarshalJSON(res); err != nil {
			t.Fatal(err)
		}
		if len(out.Content) != 1 {
			t.Fatalf("decoded %#v", out)
		}
	}
	decode() // type caches
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range rounds {
		decode()
	}
	runtime.ReadMemStats(&after)
	// A message and a result: two 32 KiB buffers upstream, a few KiB here
	// (segmentio makes a 64-entry map for each JSON object decoded into a
	// map, the _meta here).
	per := (after.TotalAlloc - before.TotalAlloc) / rounds
	t.Logf("%d bytes per request and result decoded", per)
	if per > 24<<10 {
		t.Fatalf("decoding a request and a result allocates %d bytes: the SDK copies each into a buffer of its own again", per)
	}
}
