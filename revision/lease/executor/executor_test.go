package executor_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/revision/lease/executor"
)

type reserveIn struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type reserveOut struct {
	Subject string `json:"subject"`
}

// fixture is an MCP server with the kit in front of two tools, a client
// connected to it in memory, and a lease service's key.
type fixture struct {
	session *mcp.ClientSession
	key     lease.SigningKey
	holder  ed25519.PrivateKey
	thumb   string
	now     time.Time
	runs    atomic.Int32

	mu       sync.Mutex
	verified []executor.Presentation
	redeemed []lease.Claims
	answer   lease.Failure
	verrr    error
}

func start(t *testing.T, withVerifier bool) *fixture {
	t.Helper()
	return startWith(t, withVerifier, false)
}

// startWith is start with a Redeemer as well when withRedeemer.
func startWith(t *testing.T, withVerifier, withRedeemer bool) *fixture {
	t.Helper()
	f := &fixture{now: time.Now().Truncate(time.Second)}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	f.key = lease.SigningKey{ID: "k1", Signer: priv}
	hpub, hpriv, _ := ed25519.GenerateKey(rand.Reader)
	f.holder, f.thumb = hpriv, lease.Thumbprint(hpub)
	keys := lease.NewKeySet(map[string]ed25519.PublicKey{"k1": pub})

	server := mcp.NewServer(&mcp.Implementation{Name: "inventory", Version: "1.0.0"}, nil)
	for _, name := range []string{"reserve", "cancel"} {
		mcp.AddTool(server, &mcp.Tool{Name: name}, func(ctx context.Context, _ *mcp.CallToolRequest, in reserveIn) (*mcp.CallToolResult, reserveOut, error) {
			f.runs.Add(1)
			c, _ := executor.FromContext(ctx)
			return nil, reserveOut{Subject: c.Subject}, nil
		})
	}
	opts := executor.Options{
		ServerID: "inventory", Audience: "executor.inventory",
		Keys: func(context.Context) (lease.KeySet, error) { return keys, nil },
		Now:  func() time.Time { return f.now },
	}
	if withVerifier {
		opts.Verifier = executor.VerifierFunc(func(_ context.Context, p executor.Presentation) (lease.Failure, string, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.verified = append(f.verified, p)
			return f.answer, "from the service", f.verrr
		})
	}
	if withRedeemer {
		opts.Redeemer = executor.RedeemerFunc(func(_ context.Context, c lease.Claims) (lease.Failure, string, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.redeemed = append(f.redeemed, c)
			return f.answer, "from the service", f.verrr
		})
	}
	if err := executor.Require(server, opts); err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1.0.0"}, nil)
	f.session, err = client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.session.Close(); _ = ss.Close() })
	return f
}

var args = map[string]any{"sku": "A-1", "qty": 2}

// issue signs a lease for tool inventory.<tool> and the given arguments.
func (f *fixture) issue(t *testing.T, id, tool string, arguments any) lease.Claims {
	t.Helper()
	raw, _ := json.Marshal(arguments)
	digest, err := lease.ArgumentDigest(raw)
	if err != nil {
		t.Fatal(err)
	}
	return lease.Claims{ID: id, Subject: "alice", Tenant: "acme", Tool: "inventory." + tool, Server: "inventory",
		DescriptorDigest: "sha256:" + strings.Repeat("d", 64), Generation: 3, PolicyEpoch: 9, ArgumentDigest: digest,
		Audience: "executor.inventory", HolderThumbprint: f.thumb, IssuedAt: f.now, ExpiresAt: f.now.Add(30 * time.Second)}
}

func (f *fixture) call(t *testing.T, name string, c lease.Claims, holder ed25519.PrivateKey, arguments any) *mcp.CallToolResult {
	t.Helper()
	params := &mcp.CallToolParams{Name: name, Arguments: arguments}
	if c.ID != "" {
		tok, err := lease.Sign(f.key, c)
		if err != nil {
			t.Fatal(err)
		}
		proof, err := lease.NewProof(holder, c, f.now)
		if err != nil {
			t.Fatal(err)
		}
		executor.Attach(params, tok, proof)
	}
	res, err := f.session.CallTool(context.Background(), params)
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	return res
}

func assertRefused(t *testing.T, res *mcp.CallToolResult, want string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("the call ran: %+v", res)
	}
	if got, _ := res.Meta[lease.MetaFailure].(string); got != want {
		t.Fatalf("failure %q, want %q", got, want)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.HasPrefix(text, "lease refused: "+want+": ") {
		t.Fatalf("text %q does not name %s", text, want)
	}
}

func TestToolsCallRunsOnlyWithAValidLeaseAndProof(t *testing.T) {
	f := start(t, true)
	c := f.issue(t, "lease-1", "reserve", args)
	res := f.call(t, "reserve", c, f.holder, args)
	if res.IsError {
		t.Fatalf("a valid lease was refused: %v", res.Content[0].(*mcp.TextContent).Text)
	}
	if f.runs.Load() != 1 {
		t.Fatalf("the tool ran %d times", f.runs.Load())
	}
	if got := res.StructuredContent.(map[string]any)["subject"]; got != "alice" {
		t.Fatalf("the handler saw subject %v, want the lease's", got)
	}
	if len(f.verified) != 1 || f.verified[0].Tool != "inventory.reserve" || f.verified[0].Audience != "executor.inventory" ||
		f.verified[0].ArgumentDigest != c.ArgumentDigest || f.verified[0].Token == "" || f.verified[0].Proof == "" {
		t.Fatalf("Verify was called with %+v", f.verified)
	}
	// The same lease a second time (with a fresh proof) is refused.
	assertRefused(t, f.call(t, "reserve", c, f.holder, args), "ALREADY_USED")
	if f.runs.Load() != 1 {
		t.Fatal("a replayed lease ran the tool")
	}
}

func TestRefusedCallsNeverReachTheTool(t *testing.T) {
	other, _ := func() (ed25519.PrivateKey, error) { _, k, err := ed25519.GenerateKey(rand.Reader); return k, err }()
	cases := []struct {
		name string
		run  func(t *testing.T, f *fixture) *mcp.CallToolResult
		want string
	}{
		{"no lease", func(t *testing.T, f *fixture) *mcp.CallToolResult {
			return f.call(t, "reserve", lease.Claims{}, nil, args)
		}, "BAD_SIGNATURE"},
		{"other arguments", func(t *testing.T, f *fixture) *mcp.CallToolResult {
			return f.call(t, "reserve", f.issue(t, "l", "reserve", args), f.holder, map[string]any{"sku": "A-1", "qty": 200})
		}, "ARGUMENTS_MISMATCH"},
		{"a lease for another tool", func(t *testing.T, f *fixture) *mcp.CallToolResult {
			return f.call(t, "cancel", f.issue(t, "l", "reserve", args), f.holder, args)
		}, "OTHER_TOOL"},
		{"another holder's proof", func(t *testing.T, f *fixture) *mcp.CallToolResult {
			return f.call(t, "reserve", f.issue(t, "l", "reserve", args), other, args)
		}, "PROOF_OTHER_HOLDER"},
		{"another executor's lease", func(t *testing.T, f *fixture) *mcp.CallToolResult {
			c := f.issue(t, "l", "reserve", args)
			c.Audience = "executor.billing"
			return f.call(t, "reserve", c, f.holder, args)
		}, "WRONG_AUDIENCE"},
		{"expired", func(t *testing.T, f *fixture) *mcp.CallToolResult {
			c := f.issue(t, "l", "reserve", args)
			c.IssuedAt, c.ExpiresAt = f.now.Add(-time.Minute), f.now.Add(-20*time.Second)
			return f.call(t, "reserve", c, f.holder, args)
		}, "EXPIRED"},
		{"the service says revoked", func(t *testing.T, f *fixture) *mcp.CallToolResult {
			f.answer = lease.Revoked
			return f.call(t, "reserve", f.issue(t, "l", "reserve", args), f.holder, args)
		}, "REVOKED"},
		{"the service is unreachable", func(t *testing.T, f *fixture) *mcp.CallToolResult {
			f.verrr = errors.New("connection refused")
			return f.call(t, "reserve", f.issue(t, "l", "reserve", args), f.holder, args)
		}, executor.Unavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, true)
			assertRefused(t, tc.run(t, f), tc.want)
			if f.runs.Load() != 0 {
				t.Fatal("the tool ran")
			}
		})
	}
}

func TestWithoutAVerifierLeasesAreSingleUseInProcess(t *testing.T) {
	f := start(t, false)
	c := f.issue(t, "lease-7", "reserve", args)
	if res := f.call(t, "reserve", c, f.holder, args); res.IsError {
		t.Fatalf("refused: %v", res.Content[0].(*mcp.TextContent).Text)
	}
	assertRefused(t, f.call(t, "reserve", c, f.holder, args), "ALREADY_USED")
}

// TestANewKeyIsFetchedOnce: a lease signed with a key the cached set does
// not have yet is checked again with RefreshKeys, and accepted.
func TestANewKeyIsFetchedOnce(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	hpub, hpriv, _ := ed25519.GenerateKey(rand.Reader)
	var refreshed atomic.Int32
	server := mcp.NewServer(&mcp.Implementation{Name: "inventory", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "reserve"}, func(context.Context, *mcp.CallToolRequest, reserveIn) (*mcp.CallToolResult, reserveOut, error) {
		return nil, reserveOut{}, nil
	})
	err := executor.Require(server, executor.Options{ServerID: "inventory", Audience: "executor.inventory",
		Keys: func(context.Context) (lease.KeySet, error) { return lease.NewKeySet(nil), nil },
		RefreshKeys: func(context.Context) (lease.KeySet, error) {
			refreshed.Add(1)
			return lease.NewKeySet(map[string]ed25519.PublicKey{"k2": pub}), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, _ := server.Connect(context.Background(), st, nil)
	defer ss.Close()
	cs, _ := mcp.NewClient(&mcp.Implementation{Name: "h", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	defer cs.Close()
	digest, _ := lease.ArgumentDigest([]byte(`{"sku":"A-1","qty":2}`))
	now := time.Now().Truncate(time.Second)
	c := lease.Claims{ID: "l", Subject: "alice", Tool: "inventory.reserve", Server: "inventory", DescriptorDigest: "sha256:d",
		Generation: 1, ArgumentDigest: digest, Audience: "executor.inventory", HolderThumbprint: lease.Thumbprint(hpub),
		IssuedAt: now, ExpiresAt: now.Add(20 * time.Second)}
	tok, _ := lease.Sign(lease.SigningKey{ID: "k2", Signer: priv}, c)
	proof, _ := lease.NewProof(hpriv, c, time.Now())
	params := &mcp.CallToolParams{Name: "reserve", Arguments: args}
	executor.Attach(params, tok, proof)
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError || refreshed.Load() != 1 {
		t.Fatalf("CallTool = %+v, %v; refreshed %d times", res, err, refreshed.Load())
	}
}

func TestOtherMethodsNeedNoLease(t *testing.T) {
	f := start(t, true)
	res, err := f.session.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 2 {
		t.Fatalf("ListTools = %v, %v", res, err)
	}
}

func TestRequireNeedsServerAudienceAndKeys(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, nil)
	if err := executor.Require(server, executor.Options{ServerID: "x"}); err == nil {
		t.Fatal("Require accepted missing options")
	}
}

// TestTheKitRedeemsTheClaimsItVerified: with a Redeemer (and a Verifier)
// the kit calls Redeem — never Verify — once per call that passed the
// offline checks, with exactly the verified claims; the service's refusal
// and its silence are the call's refusal; a lease refused offline never
// reaches the service.
func TestTheKitRedeemsTheClaimsItVerified(t *testing.T) {
	f := startWith(t, true, true)
	c := f.issue(t, "l-1", "reserve", args)
	if res := f.call(t, "reserve", c, f.holder, args); res.IsError {
		t.Fatalf("refused: %s", res.Content[0].(*mcp.TextContent).Text)
	}
	f.mu.Lock()
	redeemed, verified := append([]lease.Claims(nil), f.redeemed...), len(f.verified)
	f.mu.Unlock()
	if len(redeemed) != 1 || verified != 0 {
		t.Fatalf("%d redeems and %d verifies, want 1 and 0", len(redeemed), verified)
	}
	if got := redeemed[0]; got.ID != c.ID || got.Subject != c.Subject || got.Tenant != c.Tenant || got.Generation != c.Generation ||
		got.PolicyEpoch != c.PolicyEpoch || got.Tool != c.Tool || !got.ExpiresAt.Equal(c.ExpiresAt) {
		t.Fatalf("redeemed %+v, verified %+v", got, c)
	}
	f.mu.Lock()
	f.answer = lease.Revoked
	f.mu.Unlock()
	assertRefused(t, f.call(t, "reserve", f.issue(t, "l-2", "reserve", args), f.holder, args), "REVOKED")
	f.mu.Lock()
	f.answer, f.verrr = lease.Accepted, errors.New("lease service unreachable")
	f.mu.Unlock()
	assertRefused(t, f.call(t, "reserve", f.issue(t, "l-3", "reserve", args), f.holder, args), executor.Unavailable)
	assertRefused(t, f.call(t, "cancel", f.issue(t, "l-4", "reserve", args), f.holder, args), "OTHER_TOOL")
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.redeemed) != 3 {
		t.Fatalf("%d redeems, want 3 (the lease for another tool never reaches the service)", len(f.redeemed))
	}
	if f.runs.Load() != 1 {
		t.Fatalf("the tool ran %d times", f.runs.Load())
	}
}
