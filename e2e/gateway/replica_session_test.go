package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
)

// roundRobin is a loopback HTTP balancer sending each request to the next
// backend in turn (no affinity), counting what each got.
type roundRobin struct {
	next     atomic.Uint64
	backends []*httputil.ReverseProxy
	served   []atomic.Int64
}

// newRoundRobin starts a balancer over urls; it returns its MCP URL.
func newRoundRobin(t *testing.T, urls ...string) (*roundRobin, string) {
	rr := &roundRobin{served: make([]atomic.Int64, len(urls))}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		rr.backends = append(rr.backends, &httputil.ReverseProxy{
			Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host}) },
			FlushInterval: -1,
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(rr.next.Add(1)-1) % len(rr.backends)
		rr.served[i].Add(1)
		// The backend's answer (an SSE stream) may start before the
		// proxy's copy of the request body has read its end; without
		// full duplex the HTTP/1 server closes the body then, the copy
		// fails and the backend connection is torn down mid-stream.
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			t.Errorf("full duplex: %v", err)
		}
		rr.backends[i].ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		for i := range rr.served {
			t.Logf("replica %d served %d requests", i, rr.served[i].Load())
		}
	})
	return rr, srv.URL + "/mcp"
}

// TestGatewaySessionAcrossReplicas: two gateway replicas behind a
// round-robin balancer on loopback, no affinity. A 2025-11-25 client's
// session keeps working although its requests alternate between the
// replicas (the one that does not hold the session passes them to the one
// that does): it lists, reads, gets an upstream's progress, and confirms
// writes by elicitation (the answer to the question often reaching the
// other replica); every write runs once. Another principal presenting
// the session id through the balancer is refused on either replica.
func TestGatewaySessionAcrossReplicas(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{})
	second := w.StartGateway(t, w.AdmissionAddr, w.LeaseAddr, nil)
	rr, lb := newRoundRobin(t, w.GatewayURL, second)
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	accept := &elicitation{accept: true}
	var progress progressLog
	cs := gatewayworld.ConnectAt(t, lb, alice, &mcp.ClientOptions{ElicitationHandler: accept.handle, ProgressNotificationHandler: progress.handle}, "2025-11-25")
	if cs.ID() == "" {
		t.Fatal("no session")
	}
	const rounds = 4
	for i := range rounds {
		if names, _ := listAll(t, cs); len(names) != 5 {
			t.Fatalf("round %d: listed %v", i, names)
		}
		if res := call(t, cs, "shipment_status", map[string]any{"shipment_id": "S-RR"}); res.IsError {
			t.Fatalf("round %d: read: %q", i, text(res))
		}
		params := &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}}
		params.SetProgressToken(fmt.Sprintf("rr-%d", i))
		if res, err := cs.CallTool(ctxFor(t), params); err != nil || res.IsError {
			t.Fatalf("round %d: ping: %v", i, err)
		}
		id := fmt.Sprintf("S-RR-%d", i)
		if res := call(t, cs, "cancel_shipment", map[string]any{"shipment_id": id}); res.IsError || text(res) != "cancelled "+id {
			t.Fatalf("round %d: confirmed write: %q %q", i, reason(res), text(res))
		}
	}
	if got := progress.wait(rounds * gatewayworld.PingProgress); len(got) != rounds*gatewayworld.PingProgress {
		t.Fatalf("%d progress notifications, want %d", len(got), rounds*gatewayworld.PingProgress)
	}
	if n := len(callsOf(w, "cancel_shipment")); n != rounds || len(accept.asked()) != rounds {
		t.Fatalf("cancel_shipment ran %d times, %d asked; want %d", n, len(accept.asked()), rounds)
	}
	if rr.served[0].Load() == 0 || rr.served[1].Load() == 0 {
		t.Fatalf("the balancer did not use both replicas: %d, %d", rr.served[0].Load(), rr.served[1].Load())
	}
	bob := w.Token(t, "bob", gatewayworld.TenantB)
	for range 2 { // one request lands on each replica
		if code, _, body := sessionPost(t, lb, bob, cs.ID(), `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); code != http.StatusForbidden || strings.Contains(body, "shipment") {
			t.Fatalf("bob with alice's session through the balancer: %d %s", code, body)
		}
	}
}

// TestGatewaySamplingAcrossReplicas: two gateway replicas behind the
// round-robin balancer, a stateful upstream. A 2025-11-25 client that
// declared sampling calls draft_reply (whose contract allows sampling)
// four times: each time the upstream's sampling/createMessage reaches the
// client through the replica holding its session (named as from the
// server and tool), and the client's answer, whichever replica the
// balancer sends it to, reaches the upstream: every call is answered with
// the client's text, the client asked once per call. ping's sampling
// (not allowed by its contract) is refused on either replica without
// asking the client.
func TestGatewaySamplingAcrossReplicas(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{StatefulUpstream: true})
	second := w.StartGateway(t, w.AdmissionAddr, w.LeaseAddr, nil)
	rr, lb := newRoundRobin(t, w.GatewayURL, second)
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	s := &sampler{}
	cs := gatewayworld.ConnectAt(t, lb, alice, &mcp.ClientOptions{CreateMessageHandler: s.createMessage}, "2025-11-25")
	if cs.ID() == "" {
		t.Fatal("no session")
	}
	const rounds = 4
	for i := range rounds {
		if res := call(t, cs, gatewayworld.DraftReply, nil); res.IsError {
			t.Fatalf("round %d: draft_reply: %q", i, text(res))
		}
		if got := lastOf(t, w, gatewayworld.DraftReply)["sampling"]; got != "answered: "+samplerAnswer {
			t.Fatalf("round %d: the upstream got %q, want the client's answer", i, got)
		}
		if n := s.count(); n != i+1 {
			t.Fatalf("round %d: the client was asked %d times", i, n)
		}
		if res := call(t, cs, "ping", nil); res.IsError || lastPing(t, w)["sampling"] != "refused" {
			t.Fatalf("round %d: ping: %q, its sampling %v", i, text(res), lastPing(t, w)["sampling"])
		}
	}
	s.mu.Lock()
	for i, req := range s.asked {
		from, _ := req.Params.Meta["dev.toolcrib/relayed-from"].(map[string]any)
		if from["server"] != gatewayworld.ServerID || from["tool"] != gatewayworld.DraftReply {
			t.Errorf("request %d does not name its server and tool: _meta %v", i, req.Params.Meta)
		}
	}
	s.mu.Unlock()
	if s.count() != rounds {
		t.Fatalf("the client was asked %d times, want %d", s.count(), rounds)
	}
	if rr.served[0].Load() == 0 || rr.served[1].Load() == 0 {
		t.Fatalf("the balancer did not use both replicas: %d, %d", rr.served[0].Load(), rr.served[1].Load())
	}
}
