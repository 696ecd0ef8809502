package gateway_test

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
	"github.com/toolcrib/toolcrib/services/gateway"
)

// TestConfirmationUseMustReachAReplica: a gateway that needs one replica
// to acknowledge a consumed confirmation (--redis-ack-replicas 1, as under
// Sentinel) on a Redis without replicas refuses the confirmed call as
// UNAVAILABLE and runs nothing: a use a failover could forget is not
// counted, so the confirmation can never be used twice.
func TestConfirmationUseMustReachAReplica(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{Gateway: func(c *gateway.Config) { c.RedisAckReplicas = 1 }})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	c := mcp.NewClient(&mcp.Implementation{Name: "raw", Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	cs, err := c.Connect(ctxFor(t), &mcp.StreamableClientTransport{Endpoint: w.GatewayURL, HTTPClient: gatewayworld.HTTPClient(alice), DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	args := map[string]any{"shipment_id": "S-A"}
	asked, err := cs.CallTool(ctxFor(t), &mcp.CallToolParams{Name: "cancel_shipment", Arguments: args})
	if err != nil || !asked.NeedsInput() {
		t.Fatalf("the gateway did not ask: %v", err)
	}
	res, err := cs.CallTool(ctxFor(t), &mcp.CallToolParams{Name: "cancel_shipment", Arguments: args, RequestState: asked.RequestState,
		InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || reason(res) != "UNAVAILABLE" || !strings.Contains(text(res), "no replica recorded its use") {
		t.Fatalf("the confirmed call without a replica's acknowledgement: error=%v reason=%q %q", res.IsError, reason(res), text(res))
	}
	if n := len(callsOf(w, "cancel_shipment")); n != 0 {
		t.Fatalf("upstream ran cancel_shipment %d times", n)
	}
}
