package mcpapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/gateway/internal/directory"
	"github.com/toolcrib/toolcrib/services/gateway/internal/policy"
)

// Every result goes through the result policy: under allowed fields an
// error result becomes a generic error naming only the upstream's code
// (its text only in the debug log, bounded) and a text-only result is
// refused; without allowed fields both pass as before.
func TestApplyPolicyCoversErrorAndTextResults(t *testing.T) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	g := New(Options{Holder: key, ResultBudget: 64 << 10, PreviewBytes: 1024,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	st := &state{p: principal.Principal{Tenant: "tenant-a", Subject: "alice"}}
	restricted := directory.Review{Contract: &registryv1.ToolContract{AllowedFields: []string{"status"}}}
	open := directory.Review{Contract: &registryv1.ToolContract{}}
	secret := "db password hunter2 " + strings.Repeat("s", 4096)
	text := func(r *mcp.CallToolResult) string { return resultText(r) }
	errResult := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: secret}},
		StructuredContent: map[string]any{"code": "inventory.locked", "message": secret}}
	textOnly := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: secret}}}

	res, _, reason := g.applyPolicy(context.Background(), st, "inventory.x", "r-1", restricted, &directory.Descriptor{}, errResult)
	if !res.IsError || reason != policy.ReasonUpstreamError || res.Meta[MetaReason] != policy.ReasonUpstreamError ||
		res.Meta[MetaUpstreamErrorCode] != "inventory.locked" || res.StructuredContent != nil {
		t.Fatalf("error result under allowed fields: reason %q, meta %v", reason, res.Meta)
	}
	if strings.Contains(text(res), "hunter2") || !strings.Contains(text(res), "inventory.locked") || len(text(res)) > 512 {
		t.Fatalf("the answer %q", text(res))
	}
	if !strings.Contains(logs.String(), "hunter2") || strings.Count(logs.String(), "s") > 2*maxLoggedErrorText {
		t.Fatalf("the debug log (want the text, bounded): %d bytes", logs.Len())
	}
	// A failure name of the executor kit is the code.
	kit := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: secret}}, Meta: mcp.Meta{lease.MetaFailure: "LEASE_EXPIRED"}}
	if res, _, _ := g.applyPolicy(context.Background(), st, "inventory.x", "r-1", restricted, &directory.Descriptor{}, kit); res.Meta[MetaUpstreamErrorCode] != "LEASE_EXPIRED" {
		t.Fatalf("kit failure: %v", res.Meta)
	}

	res, _, reason = g.applyPolicy(context.Background(), st, "inventory.x", "r-1", restricted, &directory.Descriptor{}, textOnly)
	if !res.IsError || reason != policy.ReasonNotStructured || res.Meta[MetaReason] != policy.ReasonNotStructured || strings.Contains(text(res), "hunter2") {
		t.Fatalf("text-only result under allowed fields: reason %q, text %q", reason, text(res))
	}

	// Without allowed fields both pass as before.
	if res, _, reason := g.applyPolicy(context.Background(), st, "inventory.x", "r-1", open, &directory.Descriptor{}, errResult); !res.IsError || reason != "" || text(res) != secret {
		t.Fatalf("error result without allowed fields: reason %q", reason)
	}
	if res, _, reason := g.applyPolicy(context.Background(), st, "inventory.x", "r-1", open, &directory.Descriptor{}, textOnly); res.IsError || reason != "" || text(res) != secret {
		t.Fatalf("text result without allowed fields: reason %q", reason)
	}
	// A structured result is projected as before.
	ok := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"status":"x","cost":1}`}}, StructuredContent: json.RawMessage(`{"status":"x","cost":1}`)}
	if res, _, reason := g.applyPolicy(context.Background(), st, "inventory.x", "r-1", restricted, &directory.Descriptor{}, ok); res.IsError || reason != "" || text(res) != `{"status":"x"}` {
		t.Fatalf("structured result: reason %q text %q", reason, text(res))
	}
}
