package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
)

// dropCancels is a client transport that never delivers the client's
// notifications/cancelled (it answers 202 itself): a cancel lost on the
// way to the gateway.
type dropCancels struct {
	base    http.RoundTripper
	dropped atomic.Int64
}

func (d *dropCancels) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		if bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
			d.dropped.Add(1)
			return &http.Response{StatusCode: http.StatusAccepted, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	return d.base.RoundTrip(r)
}

// TestGatewayEndsTheCallsOfASessionItsClientEnds: a client's call waits on
// the upstream, whose elicitation the client never answers; the client
// gives up, but its notifications/cancelled is lost on the way, and then it
// ends its session (DELETE). The gateway cancels the session's calls
// upstream as the session ends: the upstream's call ends long before its
// deadline (120 s here), which is all that would end it otherwise (the
// SDK's session close waits for the session's handlers without cancelling
// them). Another principal's DELETE of the same session id ends nothing.
func TestGatewayEndsTheCallsOfASessionItsClientEnds(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{StatefulUpstream: true, PingDeadlineMs: 120000})
	endsTheCalls(t, w, w.GatewayURL)
}

// TestGatewayEndsTheCallsOfASessionItsClientEndsOnAnotherReplica: the
// same, with the session held by one replica and both DELETEs sent to the
// other (as a round-robin balancer may): the other replica passes each to
// the holder, which ends alice's calls for her DELETE and nothing for
// bob's.
func TestGatewayEndsTheCallsOfASessionItsClientEndsOnAnotherReplica(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{StatefulUpstream: true, PingDeadlineMs: 120000})
	second := w.StartGateway(t, w.AdmissionAddr, w.LeaseAddr, nil)
	endsTheCalls(t, w, second)
}

// endsTheCalls opens alice's session on w's gateway, leaves a call in
// flight whose cancel is lost, and sends the DELETEs to deleteURL.
func endsTheCalls(t *testing.T, w *gatewayworld.World, deleteURL string) {
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	asked, release := make(chan struct{}, 1), make(chan struct{})
	never := func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- struct{}{}
		// No answer while the test runs; released at its end, so that the
		// client's own session can close (the SDK's close waits for this
		// handler too).
		select {
		case <-ctx.Done():
		case <-release:
		}
		return nil, context.Canceled
	}
	tr := &dropCancels{base: gatewayworld.HTTPClient(alice).Transport}
	ks, err := mcp.NewClient(&mcp.Implementation{Name: "leaver", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: never}).Connect(ctxFor(t),
		&mcp.StreamableClientTransport{Endpoint: w.GatewayURL, HTTPClient: &http.Client{Transport: tr}, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(release)
		_ = ks.Close()
	}()
	before := len(callsOf(w, "ping"))
	cctx, cancel := context.WithCancel(ctxFor(t))
	errc := make(chan error, 1)
	go func() {
		_, err := ks.CallTool(cctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
		errc <- err
	}()
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the client was never asked")
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	ended := func(within time.Duration) bool { return pingsPast(w, before, within) }

	// A DELETE of alice's session, as a client sends it to end one.
	del := func(token string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctxFor(t), http.MethodDelete, deleteURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Mcp-Session-Id", ks.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := gatewayworld.HTTPClient(token).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	// Bob (same tenant) presents alice's session id: refused, and alice's
	// call runs on.
	if code := del(w.Token(t, "bob", gatewayworld.TenantA)); code < 400 {
		t.Fatalf("another principal's DELETE of alice's session: HTTP %d", code)
	}
	if ended(2 * time.Second) {
		t.Fatalf("another principal's DELETE ended alice's call (or the lost cancel arrived: %d dropped)", tr.dropped.Load())
	}
	if tr.dropped.Load() == 0 {
		t.Fatal("the client's notifications/cancelled was not sent (nothing dropped): the test does not test a lost cancel")
	}

	// Alice ends her session (her client still has not answered the
	// question): the call ends, far inside its deadline.
	if code := del(alice); code >= 300 {
		t.Fatalf("alice's DELETE of her own session: HTTP %d", code)
	}
	if !ended(60 * time.Second) {
		t.Fatal("the upstream's call did not end within 60 s of its client ending the session (its deadline is 120 s)")
	}
	if got := lastPing(t, w); got["elicit"] != "cancelled" && got["elicit"] != "error" {
		t.Fatalf("the upstream's question after the client ended its session: %v", got)
	}
}
