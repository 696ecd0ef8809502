package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
)

// vmcpConfig is vMCP's configuration: the world's upstream as its one
// static backend, anonymous callers, no outgoing authentication, tools
// prefixed with the backend's name ("inventory_ping").
const vmcpConfig = `name: toolcrib-bench
groupRef: toolcrib-bench
backends:
  - name: inventory
    url: %s
    transport: streamable-http
incomingAuth:
  type: anonymous
outgoingAuth:
  source: inline
  default:
    type: unauthenticated
aggregation:
  conflictResolution: prefix
  conflictResolutionConfig:
    prefixFormat: "{workload}_"
`

// vmcpTool is the world's ping as vMCP names it.
const vmcpTool = "inventory_ping"

// Rounds of the one-in-flight part: the three arms take turns, a chunk of
// calls each.
const (
	vmcpRounds = 20
	vmcpChunk  = 25
	vmcpWarmup = 50
)

// TestPeerVMCP is `make bench-peers`' vMCP line: ToolHive's vMCP (`vmcp
// serve`, the program named by TOOLCRIB_PEER_VMCP) and toolcrib's gateway
// in front of the same upstream (the gateway benchmark's, without the
// executor kit), called by the same go-sdk client: the overhead over a
// direct call at one call in flight (the three arms alternating in
// chunks), then calls per second at 16 in flight (16 sessions per arm,
// arms interleaved), and the CPU per call of each (vMCP's process time
// from /proc; the gateway's from the profile samples under its MCP
// handler, as `make bench-gateway` counts it). vMCP checks far less (no
// admission, lease or result policy); the target is toolcrib's overhead
// ≤ vMCP's and its throughput ≥ vMCP's. Never timed, never fails on speed.
func TestPeerVMCP(t *testing.T) {
	bin := os.Getenv(envPeerVMCP)
	if bin == "" {
		t.Skip("set " + envPeerVMCP + " to a vmcp binary (make bench-peers)")
	}
	steps := newStepTimer()
	w := gatewayworld.Start(t, gatewayworld.Options{NoExecutorKit: true, Gateway: steps.instrument})
	tok := w.Token(t, "alice", gatewayworld.TenantA)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "vmcp.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, vmcpConfig, w.UpstreamURL), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	host, port, _ := strings.Cut(addr, ":")
	srv := startProcess(t, bin, []string{"serve", "--config", cfg, "--host", host, "--port", port}, "HOME="+dir)
	vmcpURL := "http://" + addr + "/mcp"
	waitFor(t, 2*time.Minute, "vmcp", func() error {
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health: %s", resp.Status)
		}
		return nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1.0.0"}, nil)
	connect := func(url, token string) *mcp.ClientSession {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: gatewayworld.HTTPClient(token), DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatalf("connect %s: %v", url, err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	type target struct {
		name, url, token, tool string
	}
	// The gateway's floor (see [floorProxy]): what the rules require of a
	// gateway call, over the same services and upstream.
	floor := startFloorProxy(t, w, tok, durableCommit(t).call)
	targets := []target{
		{"direct", w.UpstreamURL, "", "ping"},
		{"gateway", w.GatewayURL, tok, "ping"},
		{"vmcp", vmcpURL, "", vmcpTool},
		{"floor", floor.URL, "", "ping"},
	}
	call := func(cs *mcp.ClientSession, tool string) (time.Duration, error) {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
		took := time.Since(start)
		if err == nil && res.IsError {
			err = fmt.Errorf("%s failed: %v", tool, res.Content)
		}
		return took, err
	}
	// The same answer from each before anything is measured.
	sessions := make([]*mcp.ClientSession, len(targets))
	for i, tg := range targets {
		sessions[i] = connect(tg.url, tg.token)
		res, err := sessions[i].CallTool(ctx, &mcp.CallToolParams{Name: tg.tool, Arguments: map[string]any{}})
		if err != nil || res.IsError || len(res.Content) != 1 {
			t.Fatalf("%s: %v %v", tg.name, err, res)
		}
		if text, ok := res.Content[0].(*mcp.TextContent); !ok || text.Text != gatewayworld.Pong(0) {
			t.Fatalf("%s answered %#v, want %q", tg.name, res.Content[0], gatewayworld.Pong(0))
		}
	}

	// One call in flight, the arms alternating in chunks; the gateway's
	// CPU from the profile, vMCP's from /proc over its own chunks.
	for range vmcpWarmup {
		for i, tg := range targets {
			if _, err := call(sessions[i], tg.tool); err != nil {
				t.Fatal(err)
			}
		}
	}
	lat := make([][]time.Duration, len(targets))
	var prof bytes.Buffer
	profiling := pprof.StartCPUProfile(&prof) == nil
	var vmcpCPU time.Duration
	for range vmcpRounds {
		for i, tg := range targets {
			cpu0 := processCPU(t, srv.Process.Pid)
			for range vmcpChunk {
				d, err := call(sessions[i], tg.tool)
				if err != nil {
					t.Fatal(err)
				}
				lat[i] = append(lat[i], d)
			}
			if tg.name == "vmcp" {
				vmcpCPU += processCPU(t, srv.Process.Pid) - cpu0
			}
		}
	}
	gatewayCPU := "n/a"
	if profiling {
		pprof.StopCPUProfile()
		ns, _, err := labelledCPU(prof.Bytes(), gatewayLabel)
		if err != nil {
			t.Fatal(err)
		}
		gatewayCPU = fmt.Sprintf("%.2f", float64(ns)/1e6/float64(len(lat[1])))
	}
	p50 := func(s []time.Duration) float64 {
		s = slices.Sorted(slices.Values(s))
		return float64(s[len(s)/2].Microseconds()) / 1000
	}

	// 16 in flight: 16 sessions per arm, the arms interleaved.
	pools := make([][]*mcp.ClientSession, len(targets))
	for i, tg := range targets {
		for range peerInFlight {
			pools[i] = append(pools[i], connect(tg.url, tg.token))
		}
	}
	rates := make([]peerArm, len(targets))
	for range peerSlices {
		for i, tg := range targets {
			var calls atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, peerInFlight)
			start := time.Now()
			stop := start.Add(peerSlice)
			for _, cs := range pools[i] {
				wg.Go(func() {
					for time.Now().Before(stop) {
						if _, err := call(cs, tg.tool); err != nil {
							errs <- err
							return
						}
						calls.Add(1)
					}
				})
			}
			wg.Wait()
			rates[i].took += time.Since(start)
			rates[i].calls += calls.Load()
			close(errs)
			for err := range errs {
				t.Fatalf("%s at %d in flight: %v", tg.name, peerInFlight, err)
			}
		}
	}
	direct, gw, vm, fl := p50(lat[0]), p50(lat[1]), p50(lat[2]), p50(lat[3])
	fmt.Printf("peer: engine=vmcp vmcp_overhead_p50_ms=%.2f gateway_overhead_p50_ms=%.2f vmcp_calls_per_s_16=%.0f gateway_calls_per_s_16=%.0f gateway_floor_overhead_p50_ms=%.2f gateway_floor_calls_per_s_16=%.0f target_below_floor=%t\n",
		vm-direct, gw-direct, rates[2].qps(), rates[1].qps(), fl-direct, rates[3].qps(), fl-direct > vm-direct || rates[3].qps() < rates[2].qps())
	fmt.Printf("  (direct_p50_ms=%.2f vmcp_p50_ms=%.2f gateway_p50_ms=%.2f direct_calls_per_s_16=%.0f; CPU per call: vmcp %.2f ms (process time), gateway %s ms (profile samples under its MCP handler); gateway floor = a go-sdk proxy making per call only what the rules require of a gateway call (Check and Issue round trips, signatures, the durable commit, the upstream call; see bench-gateway), so target_below_floor says whether vMCP's figures (no Check, no lease) are out of the rules' reach; one in flight: %d rounds of %d calls per arm; 16 in flight: %d slices of %s per arm, 16 sessions each; %s)\n",
		direct, vm, gw, rates[0].qps(), float64(vmcpCPU.Microseconds())/1000/float64(len(lat[2])), gatewayCPU,
		vmcpRounds, vmcpChunk, peerSlices, peerSlice, stamp())
}
