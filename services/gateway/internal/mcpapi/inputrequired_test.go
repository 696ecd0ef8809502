package mcpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/platform/redistest"
)

func stateGateway(t *testing.T, r *redisclient.Client) *Gateway {
	t.Helper()
	return &Gateway{opts: Options{Redis: r, ConfirmTTL: time.Minute}}
}

// An upstream's request state reaches the upstream again only with a
// retry of the call it was issued for, once: another principal, run,
// tool, generation, digest or arguments, a replay, a tampered or a made-up
// state are refused as invalid params, and the refusal echoes nothing.
func TestUpstreamStateIsBoundAndSingleUse(t *testing.T) {
	ctx := context.Background()
	g := stateGateway(t, redisclient.Open(redistest.Addr(), redistest.NewPrefix(t)))
	alice := &state{key: principalKey(principal.Principal{Tenant: "tenant-a", Subject: "alice"})}
	bob := &state{key: principalKey(principal.Principal{Tenant: "tenant-a", Subject: "bob"})}
	mallory := &state{key: principalKey(principal.Principal{Tenant: "tenant-b", Subject: "alice"})}
	tool := &admissionv1.RuntimeTool{ToolId: "inventory.reserve", Generation: 7, DescriptorDigest: "sha256:aa"}
	other := &admissionv1.RuntimeTool{ToolId: "inventory.release", Generation: 7, DescriptorDigest: "sha256:aa"}
	newer := &admissionv1.RuntimeTool{ToolId: "inventory.reserve", Generation: 8, DescriptorDigest: "sha256:aa"}
	const args, otherArgs = "sha256:args", "sha256:other-args"
	upstream := "round=2;name=" + strings.Repeat("x", 100)

	seal := func() string {
		t.Helper()
		s, err := g.sealUpstreamState(ctx, upstreamRecord{Binding: binding(alice, tool, args), State: upstream, Shown: "sha256:shown"})
		if err != nil {
			t.Fatal(err)
		}
		if !isUpstreamState(s) || strings.Contains(s, "round") {
			t.Fatalf("sealed state %q shows the upstream's or lacks the prefix", s)
		}
		return s
	}

	s := seal()
	rec, err := g.openUpstreamState(ctx, s, binding(alice, tool, args))
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != upstream || rec.Shown != "sha256:shown" {
		t.Fatalf("record %+v", rec)
	}
	if _, err := g.openUpstreamState(ctx, s, binding(alice, tool, args)); !invalidParams(err) {
		t.Fatalf("a replayed state: %v", err)
	}

	for name, bind := range map[string]string{
		"another user":        binding(bob, tool, args),
		"another tenant":      binding(mallory, tool, args),
		"another tool":        binding(alice, other, args),
		"another generation":  binding(alice, newer, args),
		"other arguments":     binding(alice, tool, otherArgs),
		"a prompt of a state": passBinding(alice, "prompt", source{"inventory", "tenant-a.readers"}, "inventory.reserve"),
	} {
		s := seal()
		if _, err := g.openUpstreamState(ctx, s, bind); !invalidParams(err) {
			t.Errorf("%s: %v", name, err)
		}
		// Refused once, the record is gone: it cannot be tried again with
		// the right binding either.
		if _, err := g.openUpstreamState(ctx, s, binding(alice, tool, args)); !invalidParams(err) {
			t.Errorf("%s: the refused state still opens: %v", name, err)
		}
	}

	s = seal()
	for name, bad := range map[string]string{
		"tampered":       s + "-TAMPERED",
		"made up":        upstreamStatePrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAA",
		"empty nonce":    upstreamStatePrefix,
		"huge":           upstreamStatePrefix + strings.Repeat("A", 1<<20),
		"no prefix":      strings.TrimPrefix(s, upstreamStatePrefix),
		"upstream's own": upstream,
	} {
		_, err := g.openUpstreamState(ctx, bad, binding(alice, tool, args))
		if !invalidParams(err) {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if msg := err.Error(); len(msg) > 200 || strings.Contains(msg, "AAAA") || strings.Contains(msg, "round") {
			t.Errorf("%s: the error echoes input: %q", name, msg)
		}
	}
	if _, err := g.openUpstreamState(ctx, s, binding(alice, tool, args)); err != nil {
		t.Fatalf("the genuine state after others were refused: %v", err)
	}

	if _, err := g.sealUpstreamState(ctx, upstreamRecord{Binding: "b", State: strings.Repeat("s", maxUpstreamState+1)}); err == nil {
		t.Fatal("an upstream state over the bound was kept")
	}
}

// Redis down: the state cannot be checked, and the answer is an internal
// error (nothing runs), not "invalid".
func TestUpstreamStateRedisDown(t *testing.T) {
	g := stateGateway(t, redisclient.Open("127.0.0.1:1", "x:"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := g.openUpstreamState(ctx, upstreamStatePrefix+"AAAA", "b")
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) || jerr.Code != jsonrpc.CodeInternalError {
		t.Fatalf("%v", err)
	}
}

func invalidParams(err error) bool {
	var jerr *jsonrpc.Error
	return errors.As(err, &jerr) && jerr.Code == jsonrpc.CodeInvalidParams
}

// Which upstream JSON-RPC errors the client gets as they are.
func TestPassedError(t *testing.T) {
	data := json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)
	missing := &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "sampling capability required", Data: data}
	invalid := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState"}
	for _, c := range []struct {
		name      string
		err       error
		answering bool
		want      int64 // 0: not passed
	}{
		{"missing capability", fmt.Errorf("calling tool: %w", missing), false, mcp.CodeMissingRequiredClientCapabilities},
		{"invalid params on a retry", invalid, true, jsonrpc.CodeInvalidParams},
		{"invalid params on a first call", invalid, false, 0},
		{"internal error", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "boom"}, true, 0},
		{"transport error", errors.New("connection refused"), true, 0},
		{"no error", nil, true, 0},
	} {
		got := passedError(c.err, c.answering)
		if (got == nil) != (c.want == 0) || got != nil && got.Code != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
	if got := passedError(missing, false); string(got.Data) != string(data) {
		t.Errorf("data %s", got.Data)
	}
	huge := &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: strings.Repeat("m", 10000), Data: json.RawMessage(`"` + strings.Repeat("d", 10000) + `"`)}
	if got := passedError(huge, false); len(got.Message) > 520 || got.Data != nil {
		t.Errorf("a huge upstream error passed: %d bytes of message, %d of data", len(got.Message), len(got.Data))
	}
}

// Only what the client declared, and only what an input request can use,
// is claimed to the upstream.
func TestForwardedCapabilities(t *testing.T) {
	for _, c := range []struct {
		name     string
		caps     *mcp.ClientCapabilities
		sampling bool
		want     string
	}{
		{"none", nil, true, `{}`},
		{"sampling is not claimed for a tool whose contract does not allow it", &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}, false, `{}`},
		{"sampling is claimed for a tool whose contract allows it", &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}, true, `{"sampling":{}}`},
		{"sampling is never claimed for a client that did not declare it", &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}, true, `{"elicitation":{}}`},
		{"elicitation and roots", &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}, RootsV2: &mcp.RootCapabilities{}}, false, `{"elicitation":{},"roots":{}}`},
		{"experimental is not forwarded", &mcp.ClientCapabilities{Experimental: map[string]any{"x": map[string]any{}}}, true, `{}`},
	} {
		b, err := json.Marshal(forwardedCapabilities(c.caps, c.sampling))
		if err != nil || string(b) != c.want {
			t.Errorf("%s: %s, want %s (%v)", c.name, b, c.want, err)
		}
	}
}

// What a 2026-07-28 client is given of an upstream's input requests: each
// elicitation shown as from its origin (its message bounded), roots as
// sent, a state of the gateway's; sampling is refused whole, and a client
// before 2026-07-28 is given none.
func TestInputPassThrough(t *testing.T) {
	ctx := context.Background()
	g := stateGateway(t, redisclient.Open(redistest.Addr(), redistest.NewPrefix(t)))
	rec := upstreamRecord{Binding: "b", State: "upstream-state"}
	reqs, sealed, err := g.passInputs(ctx, true, "server inventory, tool reserve", mcp.InputRequestMap{
		"name":  &mcp.ElicitParams{Message: "What is your name?"},
		"long":  &mcp.ElicitParams{Message: strings.Repeat("m", 100000)},
		"roots": &mcp.ListRootsParams{},
	}, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := reqs["name"].(*mcp.ElicitParams).Message; m != "[server inventory, tool reserve] What is your name?" {
		t.Errorf("message %q", m)
	}
	if m := reqs["long"].(*mcp.ElicitParams).Message; len(m) > maxInputMessage+100 {
		t.Errorf("a %d-byte message passed", len(m))
	}
	if _, ok := reqs["roots"].(*mcp.ListRootsParams); !ok {
		t.Errorf("roots: %T", reqs["roots"])
	}
	if got, err := g.openUpstreamState(ctx, sealed, "b"); err != nil || got.State != "upstream-state" {
		t.Fatalf("%+v %v", got, err)
	}
	if _, _, err := g.inputPassThrough(ctx, nil, "o", mcp.InputRequestMap{"e": &mcp.ElicitParams{}}, rec, nil); err == nil {
		t.Error("a client without input requests (no 2026-07-28 session) was given one")
	}
	for name, ir := range map[string]mcp.InputRequest{
		"sampling":            &mcp.CreateMessageParams{MaxTokens: 10},
		"sampling with tools": &mcp.CreateMessageWithToolsParams{MaxTokens: 10},
	} {
		if _, _, err := g.passInputs(ctx, true, "o", mcp.InputRequestMap{"e": &mcp.ElicitParams{}, "s": ir}, rec, nil); !errors.Is(err, errSamplingRefused) {
			t.Errorf("%s without a grant: %v", name, err)
		}
		undeclared := &samplingGrant{server: "inventory", tool: "draft"}
		if _, _, err := g.passInputs(ctx, true, "o", mcp.InputRequestMap{"s": ir}, rec, undeclared); !errors.Is(err, errSamplingRefused) {
			t.Errorf("%s to a client that did not declare sampling: %v", name, err)
		}
	}
}

// TestSamplingInputPassesOnlyWithAGrant: a tool whose approved contract
// allows sampling passes an upstream's sampling input request to a client
// that declared sampling, with includeContext dropped and its origin in
// `_meta` (an origin the upstream wrote itself is replaced); one offering
// tools needs the client's sampling-with-tools capability.
func TestSamplingInputPassesOnlyWithAGrant(t *testing.T) {
	ctx := context.Background()
	g := stateGateway(t, redisclient.Open(redistest.Addr(), redistest.NewPrefix(t)))
	rec := upstreamRecord{Binding: "b", State: "s"}
	grant := &samplingGrant{declared: &mcp.SamplingCapabilities{}, server: "inventory", tool: "draft"}
	reqs, _, err := g.passInputs(ctx, true, "server inventory, tool draft", mcp.InputRequestMap{
		"s": &mcp.CreateMessageParams{MaxTokens: 10, IncludeContext: "allServers",
			Meta: mcp.Meta{MetaRelayedFrom: "forged", "x": 1}},
	}, rec, grant)
	if err != nil {
		t.Fatal(err)
	}
	got := reqs["s"].(*mcp.CreateMessageParams)
	from, _ := got.Meta[MetaRelayedFrom].(map[string]string)
	if got.IncludeContext != "" || from["server"] != "inventory" || from["tool"] != "draft" || got.Meta["x"] != 1 {
		t.Fatalf("passed %+v", got)
	}
	withTools := &mcp.CreateMessageWithToolsParams{MaxTokens: 10, Tools: []*mcp.Tool{{Name: "t"}}}
	if _, _, err := g.passInputs(ctx, true, "o", mcp.InputRequestMap{"s": withTools}, rec, grant); !errors.Is(err, errSamplingRefused) {
		t.Errorf("tools offered to a client without sampling with tools: %v", err)
	}
	grant.declared.Tools = &mcp.SamplingToolsCapabilities{}
	if reqs, _, err := g.passInputs(ctx, true, "o", mcp.InputRequestMap{"s": withTools}, rec, grant); err != nil || len(reqs["s"].(*mcp.CreateMessageWithToolsParams).Tools) != 1 {
		t.Errorf("tools offered to a client with sampling with tools: %v", err)
	}
	// Over --sampling-max-tokens: refused, either form; at the bound passed.
	grant.maxTokens = 9
	for _, ir := range []mcp.InputRequest{withTools, &mcp.CreateMessageParams{MaxTokens: 10}} {
		if _, _, err := g.passInputs(ctx, true, "o", mcp.InputRequestMap{"s": ir}, rec, grant); !errors.Is(err, errSamplingRefused) {
			t.Errorf("maxTokens 10 over the bound 9 (%T): %v", ir, err)
		}
	}
	grant.maxTokens = 10
	if _, _, err := g.passInputs(ctx, true, "o", mcp.InputRequestMap{"s": withTools}, rec, grant); err != nil {
		t.Errorf("maxTokens at the bound: %v", err)
	}
}
