package gateway_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/gateway"
)

// runTransport adds the bearer token and the run id header.
type runTransport struct{ token, run string }

func (rt runTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+rt.token)
	if rt.run != "" {
		r.Header.Set(gateway.RunIDHeader, rt.run)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func connectRun(t *testing.T, url, token, run string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "gateway-canary-test", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctxFor(t), &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: runTransport{token, run}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect with run %q: %v", run, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// canaryBucket is admission's documented bucket of a run in one canary
// (docs/concepts/rollout.md, "Going live"), computed here independently.
func canaryBucket(server, class, run string) uint64 {
	sum := sha256.Sum256([]byte(server + "|" + class + "|" + run))
	return binary.BigEndian.Uint64(sum[:8]) % 10000
}

// TestGatewayCanaryFollowsTheRunIDHeader: a server in a 50 % read-only
// canary, reached through the gateway. A client naming a run inside the
// share (Toolcrib-Run-Id) lists and calls the read-only tools and never
// the write tool; a run outside the share, and a client naming no run,
// see none of the server's tools, and a call is refused; a malformed run
// id is a 400 before MCP. The same principal's runs do not share a
// visible set.
func TestGatewayCanaryFollowsTheRunIDHeader(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{})
	ctx := ctxFor(t)
	pct := int32(50)
	if _, err := w.St.Registry.SetRolloutStage(ctx, &registryv1.SetRolloutStageRequest{ServerId: gatewayworld.ServerID,
		AudienceClass: gatewayworld.ClassA, Stage: registryv1.Stage_STAGE_CANARY, CanaryPercent: &pct,
		CanaryEffects: []catalogv1.EffectClass{catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY}, Reason: "gateway canary test"}); err != nil {
		t.Fatal(err)
	}
	var in, probe, out string
	for i := 0; in == "" || probe == "" || out == ""; i++ {
		run := fmt.Sprintf("run-%d", i)
		if canaryBucket(gatewayworld.ServerID, gatewayworld.ClassA, run) < uint64(pct)*100 {
			if in != "" {
				probe = cmpOr(probe, run)
			}
			in = cmpOr(in, run)
		} else {
			out = cmpOr(out, run)
		}
	}
	token := w.Token(t, "alice", gatewayworld.TenantA)
	// The stage change reaches admission through its registry stream: a
	// probe run inside the share lists until it shows the read-only tools
	// only. The run under test lists only after that, so the write tool was
	// never listed to it (a run that listed it before the change would get
	// POLICY_REVOKED, rightly, instead of NOT_FOUND).
	prober := connectRun(t, w.GatewayURL, token, probe)
	var names []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		names, _ = listAll(t, prober)
		if !slices.Contains(names, "cancel_shipment") && slices.Contains(names, "shipment_status") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s inside the canary lists %v, want the read-only tools only", probe, names)
		}
		time.Sleep(50 * time.Millisecond)
	}
	inside := connectRun(t, w.GatewayURL, token, in)
	names, _ = listAll(t, inside)
	if want := []string{"export_log", "ping", "shipment_status", "slow_report"}; !slices.Equal(names, want) {
		t.Fatalf("run %s inside the canary lists %v, want %v", in, names, want)
	}
	if res := call(t, inside, "shipment_status", map[string]any{"shipment_id": "S-1"}); res.IsError {
		t.Fatalf("a read inside the canary: %s", text(res))
	}
	if res := call(t, inside, "cancel_shipment", map[string]any{"shipment_id": "S-1"}); !res.IsError || reason(res) != "NOT_FOUND" {
		t.Fatalf("the write tool inside a read-only canary: %s %v, want NOT_FOUND (never listed to this run)", text(res), res.Meta)
	}

	for _, run := range []string{out, ""} {
		cs := connectRun(t, w.GatewayURL, token, run)
		if names, _ := listAll(t, cs); len(names) != 0 {
			t.Fatalf("run %q outside the canary lists %v", run, names)
		}
		res := call(t, cs, "shipment_status", map[string]any{"shipment_id": "S-1"})
		if !res.IsError || reason(res) != "NOT_FOUND" {
			t.Fatalf("run %q outside the canary called shipment_status: %s %v, want NOT_FOUND", run, text(res), res.Meta)
		}
	}
	for _, c := range callsOf(w, "cancel_shipment") {
		t.Fatalf("the upstream ran cancel_shipment: %+v", c)
	}
	if n := len(callsOf(w, "shipment_status")); n != 1 {
		t.Fatalf("the upstream ran shipment_status %d times, want once (the run inside)", n)
	}

	for _, bad := range []string{"run id", "-run", strings.Repeat("r", 129), strings.Repeat("r", 1<<20)} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.GatewayURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(gateway.RunIDHeader, bad)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if len(bad) > 1<<16 {
				continue // the server may refuse a header that large outright
			}
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest && !(len(bad) > 1<<16 && resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge) {
			t.Fatalf("run id of %d bytes: HTTP %d, want 400", len(bad), resp.StatusCode)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
