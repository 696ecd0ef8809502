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
	"github.com/toolcrib/toolcrib/services/lease/internal/standing"
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

	var runs atomic.Int32
	cs := kitServer(t, lc, &runs)

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

// kitServer is an MCP server with the executor kit in front of the tool
// `reserve`, redeeming at the lease replica lc talks to, and a client
// session to it; runs counts the tool's runs.
func kitServer(t *testing.T, lc *leaseclient.Client, runs *atomic.Int32) *mcp.ClientSession {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "inventory", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "reserve"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
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
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil).Connect(ctxT(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestExecutorKitAgainstTwoLeaseReplicas: two executor processes, each
// with the kit redeeming at its own lease replica (shared keys, database
// and Redis). A lease issued on one replica runs once on the executor of
// the other; presented to the second executor too, it is ALREADY_USED
// there (single use across replicas, not per process); a lease revoked on
// one replica is refused by the executor redeeming at the other once that
// replica's standing view has it.
func TestExecutorKitAgainstTwoLeaseReplicas(t *testing.T) {
	s := newSuite(t, 2)
	h := newHolder(t)
	var runs atomic.Int32
	execs := []*mcp.ClientSession{
		kitServer(t, leaseclient.New(s.executor(t, 0), time.Second), &runs),
		kitServer(t, leaseclient.New(s.executor(t, 1), time.Second), &runs),
	}
	args := json.RawMessage(`{"sku":"A-1","qty":2}`)
	call := func(exec int, r *leasev1.IssueResponse) string {
		params := &mcp.CallToolParams{Name: "reserve", Arguments: args}
		executor.Attach(params, r.GetToken(), proofFor(t, h, r.GetClaims()))
		res, err := execs[exec].CallTool(ctxT(t), params)
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError {
			return "ran"
		}
		name, _ := res.Meta[lease.MetaFailure].(string)
		return name
	}
	onReplica1 := func() *leasev1.IssueResponse {
		id := "rcpt-" + randomID()
		s.allow(id)
		r, err := s.client(t, 1, s.auth.User(t, subject, tenant)).Issue(ctxT(t), &leasev1.IssueRequest{
			ReceiptId: id, ArgumentDigest: argDigest, HolderPublicKey: h.jwk, Audience: audience})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	r := onReplica1()
	if got := call(0, r); got != "ran" {
		t.Fatalf("a lease of replica 1 at the executor of replica 0: %s", got)
	}
	if got := call(1, r); got != "ALREADY_USED" {
		t.Fatalf("the same lease at the other executor: %s", got)
	}
	r = s.issue(t, h) // on replica 0
	if got := call(1, r); got != "ran" {
		t.Fatalf("a lease of replica 0 at the executor of replica 1: %s", got)
	}

	revoked := s.issue(t, h)
	if _, err := s.admin(t).Revoke(ctxT(t), &leasev1.RevokeRequest{Target: &leasev1.RevokeRequest_LeaseId{LeaseId: revoked.GetClaims().GetLeaseId()}}); err != nil {
		t.Fatal(err)
	}
	// Replica 1's standing view answers only from a load at most its window
	// old, Postgres otherwise: past it, the revocation is known there.
	time.Sleep(standing.DefaultWindow + 500*time.Millisecond)
	if got := call(1, revoked); got != "REVOKED" {
		t.Fatalf("a revoked lease at the executor of replica 1: %s", got)
	}
	if runs.Load() != 2 {
		t.Fatalf("the tool ran %d times, want 2", runs.Load())
	}
}
