package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
)

// gatewayRounds alternate the two arms so both see the same background
// load; each round makes gatewayChunk calls per arm.
const (
	gatewayRounds = 20
	gatewayChunk  = 50
	gatewayWarmup = 50
)

// TestGatewayOverhead measures the DESIGN §9 gateway target: one go-sdk
// client calls the same upstream tool (`ping`, no result policy) directly
// and through the gateway (visible set, Check, lease Issue with its
// execution receipt, lease and proof in `_meta`, result policy), one call
// in flight, the arms alternating in chunks. The upstream runs without the
// executor kit so the direct arm can call it; the gateway still issues and
// attaches a lease for every call. `make bench-gateway` prints the line;
// the target is overhead_p50_ms ≤ 2. Never timed, never fails on speed.
func TestGatewayOverhead(t *testing.T) {
	if os.Getenv("TOOLCRIB_BENCH") == "" {
		t.Skip("a benchmark: run it with make bench-gateway")
	}
	w := gatewayworld.Start(t, gatewayworld.Options{NoExecutorKit: true})
	tok := w.Token(t, "alice", gatewayworld.TenantA)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1.0.0"}, nil)
	connect := func(url, token string) *mcp.ClientSession {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: gatewayworld.HTTPClient(token), DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	direct, via := connect(w.UpstreamURL, ""), connect(w.GatewayURL, tok)
	if _, err := via.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	one := func(cs *mcp.ClientSession) time.Duration {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("ping failed: %v", res.Content)
		}
		return took
	}
	for range gatewayWarmup {
		one(direct)
		one(via)
	}
	var d, g []time.Duration
	for range gatewayRounds {
		for range gatewayChunk {
			d = append(d, one(direct))
		}
		for range gatewayChunk {
			g = append(g, one(via))
		}
	}
	slices.Sort(d)
	slices.Sort(g)
	q := func(s []time.Duration, p float64) float64 {
		return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
	}
	fmt.Printf("gateway: direct_p50_ms=%.2f gateway_p50_ms=%.2f overhead_p50_ms=%.2f gateway_p99_ms=%.2f calls=%d\n",
		q(d, 0.5), q(g, 0.5), q(g, 0.5)-q(d, 0.5), q(g, 0.99), len(g))
	fmt.Printf("  (direct_p99_ms=%.2f; one call in flight, arms alternating in chunks of %d; target overhead_p50_ms <= 2)\n", q(d, 0.99), gatewayChunk)
}
