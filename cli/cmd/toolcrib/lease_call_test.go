package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/revision/lease/executor"
	leasesvc "github.com/toolcrib/toolcrib/services/lease"
	"github.com/toolcrib/toolcrib/services/lease/admissionview"
	"github.com/toolcrib/toolcrib/services/lease/leaseclient"
)

type reserveArgs struct {
	SKU string `json:"sku"`
}

type reserved struct {
	SKU   string `json:"sku"`
	Units int    `json:"units"`
}

// TestLeaseCall: `toolcrib lease call` presents an issued lease with a
// fresh proof to an MCP server using the executor kit against a real lease
// service: the tool runs once and prints its result; the same lease again
// is refused ALREADY_USED (exit 1) without running the tool.
func TestLeaseCall(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx := context.Background()
	auth := servicetest.NewAuth(t)
	digest, _ := lease.ArgumentDigest([]byte(`{"sku":"A-1"}`))
	book := &receiptBook{m: map[string]admissionview.Decision{"r-1": {Receipt: &admissionv1.Receipt{ReceiptId: "r-1",
		Decision: admissionv1.Decision_DECISION_ALLOW, Reason: catalogv1.DecisionReason_DECISION_REASON_ALLOW,
		TenantId: "acme", Subject: "alice", ToolId: "inv.reserve", ServerId: "inv", AudienceClass: "acme.readers",
		Generation: 2, DescriptorDigest: "sha256:" + strings.Repeat("d", 64), PolicyEpoch: 1, ArgumentDigest: digest,
		DecidedAt: timestamppb.Now()}, ValidUntil: time.Now().Add(time.Minute)}}}
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: leasesvc.Schema, Sets: leasesvc.Migrations()})
	cfg := leasesvc.Config{Common: auth.Common(t, url, true, nil), KeyFile: filepath.Join(t.TempDir(), "keys.json"),
		KeyRotateEvery: time.Hour, KeyCheckInterval: time.Second, Skew: time.Second, ProofWindow: 10 * time.Second,
		Issuer: "toolcrib-lease", Receipts: book}
	addr := servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Listening = listening
		return leasesvc.Run(ctx, c)
	})

	ran := 0
	server := mcp.NewServer(&mcp.Implementation{Name: "inv", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "reserve"}, func(_ context.Context, _ *mcp.CallToolRequest, a reserveArgs) (*mcp.CallToolResult, reserved, error) {
		ran++
		return nil, reserved{SKU: a.SKU, Units: 3}, nil
	})
	lc := leaseclient.New(leasev1.NewLeaseServiceClient(servicetest.Dial(t, addr, auth.Service(t))), 0)
	if err := executor.Require(server, executor.Options{ServerID: "inv", Audience: "exec.inv", Keys: lc.Keys, RefreshKeys: lc.Refresh, Redeemer: lc}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)

	if _, errOut, code := runCLI(ctx, "dev", "holder-key"); code != 0 {
		t.Fatal(errOut)
	}
	alice := []string{"--lease", addr, "--token", auth.User(t, "alice", "acme")}
	out, errOut, code := runCLI(ctx, append(alice, "lease", "issue", "--token-only", "--receipt", "r-1", "--args", `{"sku":"A-1"}`, "--audience", "exec.inv")...)
	token := strings.TrimSpace(out)
	if code != 0 || strings.Count(token, ".") != 2 || strings.ContainsAny(token, " \t\n") {
		t.Fatalf("lease issue --token-only: exit %d %q %s", code, out, errOut)
	}
	call := []string{"lease", "call", "--url", hs.URL, "--lease", token, "--args", `{"sku":"A-1"}`, "reserve"}
	if out, errOut, code := runCLI(ctx, call...); code != 0 || !strings.Contains(out, `"units": 3`) || ran != 1 {
		t.Fatalf("first call: exit %d, ran %d\n%s%s", code, ran, out, errOut)
	}
	out, errOut, code = runCLI(ctx, call...)
	if code != 1 || !strings.Contains(out, "refused  ALREADY_USED") || !strings.Contains(errOut, "refused the lease: ALREADY_USED") || ran != 1 {
		t.Fatalf("second call: exit %d, ran %d\n%s%s", code, ran, out, errOut)
	}
	other := []string{"lease", "call", "--url", hs.URL, "--lease", token, "--args", `{"sku":"B-2"}`, "reserve"}
	if out, _, code := runCLI(ctx, other...); code != 1 || !strings.Contains(out, "ARGUMENTS_MISMATCH") || ran != 1 {
		t.Fatalf("other arguments: exit %d, ran %d\n%s", code, ran, out)
	}
}
