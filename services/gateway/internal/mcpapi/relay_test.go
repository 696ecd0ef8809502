package mcpapi

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// One call's relayed log messages are bounded: the first maxLogsPerCall
// pass (data over maxLogData bytes of JSON cut to a string of them, the
// logger naming the origin), then one warning saying the rest are
// dropped, then nothing; messages below the client's level (debug under
// info) are neither relayed nor counted, so a chatty debug logger does not
// use up the bound.
func TestLogBudgetBoundsOneCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server := mcp.NewServer(&mcp.Implementation{Name: "gw", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}}})
	var mu sync.Mutex
	var got []*mcp.LoggingMessageParams
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
		mu.Lock()
		got = append(got, req.Params)
		mu.Unlock()
	}})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	var b logBudget
	const origin = "server inventory, tool ping: l"
	b.relay(ss, ctx, &mcp.LoggingMessageParams{Level: "info", Data: map[string]any{"big": strings.Repeat("x", 2*maxLogData)}}, origin, "info")
	for range 2 * maxLogsPerCall {
		b.relay(ss, ctx, &mcp.LoggingMessageParams{Level: "debug", Data: "below the level"}, origin, "info")
	}
	for range maxLogsPerCall + 10 {
		b.relay(ss, ctx, &mcp.LoggingMessageParams{Level: "info", Data: "m"}, origin, "info")
	}
	want := maxLogsPerCall + 1 // the big one, 99 "m" (debug ones neither sent nor counted), the warning
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != want {
		t.Fatalf("%d messages relayed, want %d", len(got), want)
	}
	big, ok := got[0].Data.(string)
	if !ok || len(big) > maxLogData+len("…") || !strings.HasPrefix(big, `{"big":"xxx`) {
		t.Fatalf("data over the bound relayed as %T of %d bytes", got[0].Data, len(big))
	}
	for i, m := range got[1 : want-1] {
		if m.Data != "m" || m.Logger != origin {
			t.Fatalf("message %d: %+v", i+1, m)
		}
	}
	if last := got[want-1]; last.Data != logsDropped || last.Level != "warning" || last.Logger != origin {
		t.Fatalf("the last message %+v, want the warning that the rest are dropped", last)
	}
}
