package lease_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/revision/lease/executor"
	"github.com/toolcrib/toolcrib/services/lease/leaseclient"

	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
)

// TestExecutorKitRunsTheCallOnlyWithALease is the tour: a lease from the
// real lease service lets an MCP server built on the go-sdk run the call
// once; the same lease again, no lease, or a lease for other arguments is
// a tool error naming the failure, and the tool never runs.
func TestExecutorKitRunsTheCallOnlyWithALease(t *testing.T) {
	s := newSuite(t, 1)
	h := newHolder(t)
	lc := leaseclient.New(s.client(t, 0, s.auth.Service(t)), time.Second)

	srv := mcp.NewServer(&mcp.Implementation{Name: "inventory", Version: "1.0.0"}, nil)
	var runs atomic.Int32
	type in struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "reserve"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ in) (*mcp.CallToolResult, any, error) {
		runs.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "reserved"}}}, nil, nil
	})
	if err := executor.Require(srv, executor.Options{ServerID: server, Audience: audience, Keys: lc.Keys, RefreshKeys: lc.Refresh, Redeemer: lc}); err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctxT(t), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil).Connect(ctxT(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	args := json.RawMessage(`{"sku":"A-1","qty":2}`)
	call := func(r *leasev1.IssueResponse, arguments json.RawMessage) *mcp.CallToolResult {
		params := &mcp.CallToolParams{Name: "reserve", Arguments: arguments}
		if r != nil {
			executor.Attach(params, r.GetToken(), proofFor(t, h, r.GetClaims()))
		}
		res, err := cs.CallTool(ctxT(t), params)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	failure := func(res *mcp.CallToolResult) string {
		if !res.IsError {
			return ""
		}
		name, _ := res.Meta[lease.MetaFailure].(string)
		if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, name) {
			t.Fatalf("refusal text %q does not name %s", text, name)
		}
		return name
	}

	r := s.issue(t, h)
	if res := call(r, args); res.IsError {
		t.Fatalf("the leased call was refused: %s", res.Content[0].(*mcp.TextContent).Text)
	}
	if got := failure(call(r, args)); got != "ALREADY_USED" {
		t.Fatalf("the same lease again: %q, want ALREADY_USED", got)
	}
	if got := failure(call(nil, args)); got != "BAD_SIGNATURE" {
		t.Fatalf("no lease: %q", got)
	}
	if got := failure(call(s.issue(t, h), json.RawMessage(`{"sku":"A-1","qty":200}`))); got != "ARGUMENTS_MISMATCH" {
		t.Fatalf("other arguments: %q", got)
	}
	// A lease the service refuses (revoked) is refused by the executor.
	r = s.issue(t, h)
	if _, err := s.admin(t).Revoke(ctxT(t), &leasev1.RevokeRequest{Target: &leasev1.RevokeRequest_LeaseId{LeaseId: r.GetClaims().GetLeaseId()}}); err != nil {
		t.Fatal(err)
	}
	if got := failure(call(r, args)); got != "REVOKED" {
		t.Fatalf("revoked lease: %q", got)
	}
	if runs.Load() != 1 {
		t.Fatalf("the tool ran %d times, want once", runs.Load())
	}
}
