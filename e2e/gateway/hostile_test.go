package gateway_test

import (
	"context"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
	"github.com/toolcrib/toolcrib/services/gateway/gatewaytest"
)

// updatedLine is the data line of a resources/updated notification on an
// upstream's event stream.
var updatedLine = regexp.MustCompile(`data: [^\n]*"notifications/resources/updated"[^\n]*`)

// substitutes rewrites an upstream's resources/updated notifications, in
// the order it sends them, by the messages queued: a queued "" lets one
// through as it is; with none queued they go through.
type substitutes struct {
	mu       sync.Mutex
	queue    []string
	replaced atomic.Int64
}

func (s *substitutes) push(msgs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, msgs...)
}

func (s *substitutes) rewrite(b []byte) []byte {
	return updatedLine.ReplaceAllFunc(b, func(line []byte) []byte {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.queue) == 0 {
			return line
		}
		msg := s.queue[0]
		s.queue = s.queue[1:]
		if msg == "" {
			return line
		}
		s.replaced.Add(1)
		return []byte("data: " + msg)
	})
}

// TestGatewayOutlivesAHostileUpstream: each message of
// [gatewaytest.HostileMessages], sent by the upstream on the standalone
// stream of the gateway's session with it (in place of a resources/updated
// notification for a client's subscription), leaves the gateway serving
// that client: the upstream's next resources/updated, sent right after on
// the same stream, still reaches the client, and its tools/call still
// answers. The gateway runs in this test binary, so a panic on any of its
// goroutines ends the test (roots/list without params did, before
// 76c0a4c). The client declares everything an upstream may ask of it.
func TestGatewayOutlivesAHostileUpstream(t *testing.T) {
	subs := &substitutes{}
	w := gatewayworld.Start(t, gatewayworld.Options{StatefulUpstream: true, WrapUpstream: func(h http.Handler) http.Handler {
		return gatewaytest.Rewrite(h, subs.rewrite)
	}})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	var updates atomic.Int64
	opts := &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if req.Params.URI == gatewayworld.ResourceURI {
				updates.Add(1)
			}
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Content: &mcp.TextContent{Text: "no"}}, nil
		},
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, opts).Connect(ctxFor(t),
		&mcp.StreamableClientTransport{Endpoint: w.GatewayURL, HTTPClient: gatewayworld.HTTPClient(alice)},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Subscribe(ctxFor(t), &mcp.SubscribeParams{URI: gatewayworld.ResourceURI}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	for _, msg := range gatewaytest.HostileMessages {
		before := updates.Load()
		subs.push(msg, "")
		for range 2 {
			if err := w.UpdateResource(ctxFor(t), gatewayworld.ResourceURI); err != nil {
				t.Fatal(err)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); updates.Load() == before; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after %s the client got no resources/updated", msg)
			}
		}
		res, err := cs.CallTool(ctxFor(t), &mcp.CallToolParams{Name: "shipment_status", Arguments: map[string]any{"shipment_id": "S-1"}})
		if err != nil || res.IsError {
			t.Fatalf("after %s the client cannot call: %v %q", msg, err, text(res))
		}
	}
	if n := subs.replaced.Load(); n != int64(len(gatewaytest.HostileMessages)) {
		t.Fatalf("%d of %d hostile messages were sent", n, len(gatewaytest.HostileMessages))
	}
}
