package discoverytest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// TestNotifyOnSessionStart: with ServerOptions.NotifyOnSessionStart each
// session's first tools/list comes after a tools/list_changed, and no other
// does, over streamable HTTP and in memory.
func TestNotifyOnSessionStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cat := discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...)
	o := discoverytest.ServerOptions{NotifyOnSessionStart: true}
	h := discoverytest.NewHTTP(t, cat, o, false)
	transports := map[string]func() mcp.Transport{
		"http": func() mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: h.URL, DisableStandaloneSSE: true}
		},
		"memory": func() mcp.Transport { tr, _ := discoverytest.NewInMemory(t, cat, o); return tr },
	}
	for name, transport := range transports {
		t.Run(name, func(t *testing.T) {
			var heard atomic.Int32
			client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { heard.Add(1) }})
			for session := 1; session <= 2; session++ {
				cs, err := client.Connect(ctx, transport(), nil)
				if err != nil {
					t.Fatal(err)
				}
				for range 2 {
					if _, err := cs.ListTools(ctx, nil); err != nil {
						t.Fatal(err)
					}
				}
				for deadline := time.Now().Add(5 * time.Second); heard.Load() < int32(session) && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
				_ = cs.Close()
			}
			time.Sleep(100 * time.Millisecond)
			if n := heard.Load(); n != 2 {
				t.Fatalf("%d notifications for two sessions listing twice each, want 2", n)
			}
		})
	}
}
