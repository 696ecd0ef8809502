package gateway_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
)

// progressLog records the progress notifications a client received.
type progressLog struct {
	mu  sync.Mutex
	got []*mcp.ProgressNotificationParams
}

func (p *progressLog) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, req.Params)
}

// wait returns the notifications once there are n, or after 5 s.
func (p *progressLog) wait(n int) []*mcp.ProgressNotificationParams {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got := p.all(); len(got) >= n {
			return got
		}
	}
	return p.all()
}

func (p *progressLog) all() []*mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), p.got...)
}

// TestGatewayRelaysProgress: an upstream's progress reaches the calling
// client under the client's own token, every time, including the first
// call on a new upstream session (the gateway's upstream session used to
// be opened under the first call's request context, and the relay sent
// under the upstream connection's context: the stateless endpoint could
// route neither to the call's stream, and they were lost), at 2026-07-28
// (stateless) and at 2025-11-25 (a session); a client that gave no token
// gets none, and one client never gets another's.
func TestGatewayRelaysProgress(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	for i, v := range []string{"2026-07-28", "2025-11-25", "2026-07-28", "2025-11-25"} {
		var log, other progressLog
		cs := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{ProgressNotificationHandler: log.handle}, v)
		bystander := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{ProgressNotificationHandler: other.handle}, v)
		if _, err := bystander.ListTools(ctxFor(t), nil); err != nil {
			t.Fatal(err)
		}
		token := fmt.Sprintf("client-token-%d", i)
		params := &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}}
		params.SetProgressToken(token)
		res, err := cs.CallTool(ctxFor(t), params)
		if err != nil || res.IsError {
			t.Fatalf("%s call %d: %v %q", v, i, err, text(res))
		}
		// The client SDK hands a notification to its handler goroutine and
		// the answer to the caller at once: wait for the handler.
		got := log.wait(gatewayworld.PingProgress)
		if len(got) != gatewayworld.PingProgress {
			t.Fatalf("%s call %d (first on its upstream session: %v): %d progress notifications, want %d", v, i, i == 0, len(got), gatewayworld.PingProgress)
		}
		for j, p := range got {
			if p.ProgressToken != token || p.Progress != float64(j+1) || p.Message != fmt.Sprintf("step %d", j+1) {
				t.Fatalf("%s notification %d: %+v", v, j, p)
			}
		}
		if res, err := cs.CallTool(ctxFor(t), &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err != nil || res.IsError || len(log.all()) != gatewayworld.PingProgress {
			t.Fatalf("%s: a call without a progress token: %v, %d notifications", v, err, len(log.all()))
		}
		if n := len(other.all()); n != 0 {
			t.Fatalf("%s: another client got %d notifications", v, n)
		}
	}
}
