// Package gateway_test drives the MCP gateway through a real go-sdk MCP
// client against the real registry, discovery, admission and lease
// services and an upstream that verifies leases with the executor kit.
package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/gateway"
)

const (
	metaReason   = "dev.toolcrib/reason"
	metaDropped  = "dev.toolcrib/dropped-fields"
	metaArtifact = "dev.toolcrib/artifact"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func text(r *mcp.CallToolResult) string { return gatewayworld.Text(r) }

func reason(r *mcp.CallToolResult) string {
	s, _ := r.Meta[metaReason].(string)
	return s
}

// listAll walks every tools/list page and returns the names in order and
// the number of pages.
func listAll(t *testing.T, cs *mcp.ClientSession) ([]string, int) {
	t.Helper()
	var names []string
	pages := 0
	cursor := ""
	for {
		res, err := cs.ListTools(ctxFor(t), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		pages++
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if res.NextCursor == "" {
			return names, pages
		}
		cursor = res.NextCursor
	}
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctxFor(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// elicitation answers confirmation requests and records them.
type elicitation struct {
	mu       sync.Mutex
	messages []string
	accept   bool
}

func (e *elicitation) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.messages = append(e.messages, req.Params.Message)
	if !e.accept {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
}

func (e *elicitation) asked() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.messages)
}

func callsOf(w *gatewayworld.World, tool string) []gatewayworld.Call {
	var out []gatewayworld.Call
	for _, c := range w.Calls() {
		if c.Tool == tool {
			out = append(out, c)
		}
	}
	return out
}

// TestGateway runs the gateway's behaviours in one world, in order (the
// last one revokes the grant).
func TestGateway(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{Gateway: func(c *gateway.Config) { c.PageSize = 2 }})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	cs := gatewayworld.Connect(t, w.GatewayURL, alice, &mcp.ClientOptions{ElicitationHandler: (&elicitation{accept: true}).handle})

	t.Run("no token is 401 with the protected-resource metadata", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, w.GatewayURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		challenge := resp.Header.Get("WWW-Authenticate")
		mdURL := strings.TrimSuffix(w.GatewayURL, gateway.MCPPath) + gateway.MetadataPath
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(challenge, `resource_metadata="`+mdURL+`"`) {
			t.Fatalf("status %d, WWW-Authenticate %q", resp.StatusCode, challenge)
		}
		md, err := http.Get(mdURL)
		if err != nil {
			t.Fatal(err)
		}
		defer md.Body.Close()
		var doc struct {
			Resource string `json:"resource"`
		}
		if err := json.NewDecoder(md.Body).Decode(&doc); err != nil || doc.Resource != w.GatewayURL {
			t.Fatalf("metadata resource %q (%v), want %s", doc.Resource, err, w.GatewayURL)
		}
		forged := w.St.Auth.User(t, "alice", gatewayworld.TenantA, "readers") + "x"
		req2, _ := http.NewRequest(http.MethodPost, w.GatewayURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req2.Header.Set("Authorization", "Bearer "+forged)
		resp2, err := http.DefaultClient.Do(req2)
		if err != nil {
			t.Fatal(err)
		}
		resp2.Body.Close()
		if resp2.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a forged token got %d", resp2.StatusCode)
		}
	})

	t.Run("a tenant sees only its approved enabled tools, paged", func(t *testing.T) {
		names, pages := listAll(t, cs)
		want := []string{"cancel_shipment", "export_log", "ping", "shipment_status", "slow_report"}
		if !slices.Equal(names, want) || pages != 3 {
			t.Fatalf("alice sees %v in %d pages, want %v in 3", names, pages, want)
		}
		res, err := cs.ListTools(ctxFor(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.CacheScope != "private" || res.TTLMs != 1000 {
			t.Fatalf("cacheScope %q ttlMs %d", res.CacheScope, res.TTLMs)
		}
		bob := gatewayworld.Connect(t, w.GatewayURL, w.Token(t, "bob", gatewayworld.TenantB), nil)
		if names, _ := listAll(t, bob); len(names) != 0 {
			t.Fatalf("bob of tenant-b sees %v", names)
		}
		cr := call(t, bob, "shipment_status", map[string]any{"shipment_id": "S-1"})
		if !cr.IsError || reason(cr) != "NOT_FOUND" {
			t.Fatalf("bob's call of tenant-a's tool: %v %q", cr.IsError, text(cr))
		}
		cr = call(t, cs, "secret_report", nil)
		if !cr.IsError || reason(cr) != "NOT_FOUND" || len(callsOf(w, "secret_report")) != 0 {
			t.Fatalf("the unapproved tool: %v %q", cr.IsError, text(cr))
		}
	})

	t.Run("a cursor of another visible set is refused", func(t *testing.T) {
		first, err := cs.ListTools(ctxFor(t), nil)
		if err != nil || first.NextCursor == "" {
			t.Fatalf("first page: %v", err)
		}
		_, err = cs.ListTools(ctxFor(t), &mcp.ListToolsParams{Cursor: first.NextCursor + "A"})
		if err == nil {
			t.Fatal("a garbled cursor was accepted")
		}
	})

	t.Run("a read call runs under a lease the upstream verifies, projected", func(t *testing.T) {
		res := call(t, cs, "shipment_status", map[string]any{"shipment_id": "S-1"})
		if res.IsError {
			t.Fatalf("call failed: %s", text(res))
		}
		var sc map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &sc)
		if _, leaked := sc["internal_cost"]; leaked || sc["shipment_id"] != "S-1" || sc["updated_at"] == nil {
			t.Fatalf("structured content %v", sc)
		}
		if strings.Contains(text(res), "internal_cost") {
			t.Fatalf("the text carries the dropped field: %s", text(res))
		}
		if d, _ := json.Marshal(res.Meta[metaDropped]); string(d) != `["internal_cost"]` {
			t.Fatalf("dropped %s", d)
		}
		calls := callsOf(w, "shipment_status")
		if len(calls) != 1 {
			t.Fatalf("upstream ran %d calls", len(calls))
		}
		c := calls[0].Claims
		digest, _ := lease.ArgumentDigest([]byte(`{"shipment_id":"S-1"}`))
		if c.Subject != "alice" || c.Tenant != gatewayworld.TenantA || c.Tool != "inventory.shipment_status" ||
			c.Audience != gatewayworld.Audience || c.ArgumentDigest != digest || c.ID == "" {
			t.Fatalf("lease claims %+v", c)
		}
	})

	t.Run("the upstream gets the class's credential, never the caller's token", func(t *testing.T) {
		auths := w.UpstreamAuthorizations()
		if len(auths) == 0 {
			t.Fatal("the upstream saw no tools/call")
		}
		for _, a := range auths {
			if a != "Bearer "+gatewayworld.UpstreamCredential || strings.Contains(a, alice) {
				t.Fatalf("the upstream got Authorization %q", a)
			}
		}
	})

	t.Run("the upstream deadline comes from the contract", func(t *testing.T) {
		start := time.Now()
		res := call(t, cs, "slow_report", nil)
		took := time.Since(start)
		if !res.IsError || reason(res) != "UPSTREAM_DEADLINE" || !strings.Contains(text(res), "300 ms") {
			t.Fatalf("slow_report: %v %q %q", res.IsError, reason(res), text(res))
		}
		if took >= 3*time.Second {
			t.Fatalf("the gateway waited %v, past the tool's own answer", took)
		}
	})

	t.Run("every protocol version lists and calls", func(t *testing.T) {
		for _, v := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
			c := gatewayworld.ConnectAt(t, w.GatewayURL, alice, nil, v)
			if got := c.InitializeResult().ProtocolVersion; got != v {
				t.Fatalf("asked for %s, negotiated %s", v, got)
			}
			if names, _ := listAll(t, c); len(names) != 5 {
				t.Fatalf("%s: %v", v, names)
			}
			if res := call(t, c, "shipment_status", map[string]any{"shipment_id": "S-V"}); res.IsError {
				t.Fatalf("%s: %s", v, text(res))
			}
		}
	})

	t.Run("the upstream refuses a call without a lease", func(t *testing.T) {
		direct := gatewayworld.Connect(t, w.UpstreamURL, "", nil)
		before := len(callsOf(w, "shipment_status"))
		res := call(t, direct, "shipment_status", map[string]any{"shipment_id": "S-2"})
		if !res.IsError || len(callsOf(w, "shipment_status")) != before {
			t.Fatalf("a direct call without a lease ran: %s", text(res))
		}
	})

	t.Run("a result missing required evidence is refused naming it", func(t *testing.T) {
		res := call(t, cs, "shipment_status", map[string]any{"shipment_id": gatewayworld.NoEvidence})
		if !res.IsError || reason(res) != "MISSING_EVIDENCE" || !strings.Contains(text(res), "updated_at") {
			t.Fatalf("got %v %q %q", res.IsError, reason(res), text(res))
		}
		if res.StructuredContent != nil || strings.Contains(text(res), "in_transit") {
			t.Fatalf("the refused result leaked: %s", text(res))
		}
	})

	t.Run("a write tool asks for confirmation and runs only after it", func(t *testing.T) {
		decline := &elicitation{accept: false}
		cd := gatewayworld.Connect(t, w.GatewayURL, alice, &mcp.ClientOptions{ElicitationHandler: decline.handle})
		res := call(t, cd, "cancel_shipment", map[string]any{"shipment_id": "S-9"})
		if !res.IsError || reason(res) != "USER_DECLINED" || len(callsOf(w, "cancel_shipment")) != 0 {
			t.Fatalf("declined: %v %q %q, upstream ran %d", res.IsError, reason(res), text(res), len(callsOf(w, "cancel_shipment")))
		}
		accept := &elicitation{accept: true}
		ca := gatewayworld.Connect(t, w.GatewayURL, alice, &mcp.ClientOptions{ElicitationHandler: accept.handle})
		res = call(t, ca, "cancel_shipment", map[string]any{"shipment_id": "S-9"})
		if res.IsError || text(res) != "cancelled S-9" {
			t.Fatalf("confirmed call: %q", text(res))
		}
		asked := accept.asked()
		if len(asked) != 1 || !strings.Contains(asked[0], "cancel_shipment") || !strings.Contains(asked[0], "WRITE") || !strings.Contains(asked[0], `"S-9"`) {
			t.Fatalf("confirmation messages %q", asked)
		}
		if n := len(callsOf(w, "cancel_shipment")); n != 1 {
			t.Fatalf("upstream ran cancel_shipment %d times", n)
		}
		// The gateway asserted the confirmation with its own confirmer
		// token: the receipt names it, the time and what was shown.
		adm := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, w.AdmissionAddr, alice))
		rid, _ := res.Meta["dev.toolcrib/receipt"].(string)
		got, err := adm.GetReceipt(ctxFor(t), &admissionv1.GetReceiptRequest{ReceiptId: rid})
		if rc := got.GetReceipt(); err != nil || rc.GetMode() != admissionv1.Mode_MODE_USER_CONFIRMED || rc.GetConfirmer() != "test-confirmer" ||
			!proto.Equal(rc.GetConfirmedAt(), rc.GetDecidedAt()) || !canonical.ValidDigest(rc.GetShownDigest()) || rc.GetSubject() != "alice" {
			t.Fatalf("receipt %q of the confirmed call: %v %v", rid, rc, err)
		}
		// Clients of 2025-06-18 and 2025-11-25 hold a session: they are
		// asked by elicitation/create within the call, and the call runs
		// once when the user accepts, never when the user declines.
		for i, v := range []string{"2025-06-18", "2025-11-25"} {
			oldAccept, oldDecline := &elicitation{accept: true}, &elicitation{accept: false}
			before := len(callsOf(w, "cancel_shipment"))
			od := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{ElicitationHandler: oldDecline.handle}, v)
			if od.ID() == "" {
				t.Fatalf("%s: the gateway gave no session", v)
			}
			res = call(t, od, "cancel_shipment", map[string]any{"shipment_id": "S-10"})
			if !res.IsError || reason(res) != "USER_DECLINED" || len(oldDecline.asked()) != 1 || len(callsOf(w, "cancel_shipment")) != before {
				t.Fatalf("%s declined: %v %q %q, asked %q", v, res.IsError, reason(res), text(res), oldDecline.asked())
			}
			oa := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{ElicitationHandler: oldAccept.handle}, v)
			id := fmt.Sprintf("S-1%d", i+1)
			res = call(t, oa, "cancel_shipment", map[string]any{"shipment_id": id})
			if res.IsError || text(res) != "cancelled "+id || len(callsOf(w, "cancel_shipment")) != before+1 {
				t.Fatalf("%s accepted: %q, upstream ran %d", v, text(res), len(callsOf(w, "cancel_shipment"))-before)
			}
			if asked := oldAccept.asked(); len(asked) != 1 || !strings.Contains(asked[0], "cancel_shipment") || !strings.Contains(asked[0], "WRITE") || !strings.Contains(asked[0], `"`+id+`"`) {
				t.Fatalf("%s: confirmation messages %q", v, asked)
			}
			rid, _ := res.Meta["dev.toolcrib/receipt"].(string)
			got, err := adm.GetReceipt(ctxFor(t), &admissionv1.GetReceiptRequest{ReceiptId: rid})
			if rc := got.GetReceipt(); err != nil || rc.GetMode() != admissionv1.Mode_MODE_USER_CONFIRMED || rc.GetConfirmer() != "test-confirmer" || !canonical.ValidDigest(rc.GetShownDigest()) {
				t.Fatalf("%s: receipt %q of the confirmed call: %v %v", v, rid, rc, err)
			}
		}
		// A client that declared no elicitation cannot be asked: it is
		// told so, and nothing runs.
		before := len(callsOf(w, "cancel_shipment"))
		old := gatewayworld.ConnectAt(t, w.GatewayURL, alice, nil, "2025-11-25")
		res = call(t, old, "cancel_shipment", map[string]any{"shipment_id": "S-10"})
		if !res.IsError || reason(res) != "CONFIRMATION_UNANSWERABLE" || len(callsOf(w, "cancel_shipment")) != before {
			t.Fatalf("2025-11-25 client without elicitation: %v %q %q", res.IsError, reason(res), text(res))
		}
	})

	t.Run("a forged confirmation is refused", func(t *testing.T) {
		// A client that handles input requests itself.
		raw := mcp.NewClient(&mcp.Implementation{Name: "raw", Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
		rs, err := raw.Connect(ctxFor(t), &mcp.StreamableClientTransport{Endpoint: w.GatewayURL, HTTPClient: gatewayworld.HTTPClient(alice), DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		before := len(callsOf(w, "cancel_shipment"))
		r2, err := rs.CallTool(ctxFor(t), &mcp.CallToolParams{Name: "cancel_shipment", Arguments: map[string]any{"shipment_id": "S-12"}})
		if err != nil {
			t.Fatal(err)
		}
		if !r2.NeedsInput() || r2.RequestState == "" {
			t.Fatalf("no input request: %q", text(r2))
		}
		forgedState := &mcp.CallToolParams{Name: "cancel_shipment", Arguments: map[string]any{"shipment_id": "S-12"},
			RequestState: "not-a-state", InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}}
		r3, err := rs.CallTool(ctxFor(t), forgedState)
		if err != nil {
			t.Fatal(err)
		}
		otherArgs := &mcp.CallToolParams{Name: "cancel_shipment", Arguments: map[string]any{"shipment_id": "S-13"},
			RequestState: r2.RequestState, InputResponses: forgedState.InputResponses}
		r4, err := rs.CallTool(ctxFor(t), otherArgs)
		if err != nil {
			t.Fatal(err)
		}
		if !r3.IsError || !r4.IsError || len(callsOf(w, "cancel_shipment")) != before {
			t.Fatalf("forged state %q, state for other arguments %q; upstream ran %d more", text(r3), text(r4), len(callsOf(w, "cancel_shipment"))-before)
		}
	})

	t.Run("a 5 MB result becomes an artifact readable only by its caller", func(t *testing.T) {
		res := call(t, cs, "export_log", nil)
		if res.IsError {
			t.Fatalf("export_log: %s", text(res))
		}
		var link *mcp.ResourceLink
		for _, c := range res.Content {
			if l, ok := c.(*mcp.ResourceLink); ok {
				link = l
			}
		}
		if link == nil || !strings.HasPrefix(link.URI, "toolcrib-artifact://") {
			t.Fatalf("no resource link in %d contents", len(res.Content))
		}
		if b, _ := json.Marshal(res); len(b) > 64<<10 {
			t.Fatalf("the answer has %d bytes, over the budget", len(b))
		}
		want := gatewayworld.ExportLog()
		if !strings.Contains(text(res), want[:200]) || !strings.Contains(text(res), "5242880 bytes") {
			t.Fatalf("preview %q", text(res)[:300])
		}
		got, err := cs.ReadResource(ctxFor(t), &mcp.ReadResourceParams{URI: link.URI})
		if err != nil || len(got.Contents) != 1 || got.Contents[0].Text != want {
			t.Fatalf("alice reads her artifact: %v", err)
		}
		carol := gatewayworld.Connect(t, w.GatewayURL, w.Token(t, "carol", gatewayworld.TenantA), nil)
		if _, err := carol.ReadResource(ctxFor(t), &mcp.ReadResourceParams{URI: link.URI}); err == nil {
			t.Fatal("carol of the same tenant read alice's artifact (TestArtifactsBelongToTheirCaller has the whole rule)")
		}
		bob := gatewayworld.Connect(t, w.GatewayURL, w.Token(t, "bob", gatewayworld.TenantB), nil)
		if _, err := bob.ReadResource(ctxFor(t), &mcp.ReadResourceParams{URI: link.URI}); err == nil {
			t.Fatal("bob of tenant-b read tenant-a's artifact")
		}
		if l, err := bob.ListResources(ctxFor(t), nil); err != nil || len(l.Resources) != 0 {
			t.Fatalf("bob lists %v, %v", l, err)
		}
		if l, err := cs.ListResources(ctxFor(t), nil); err != nil || len(l.Resources) == 0 || l.Resources[0].URI != link.URI {
			t.Fatalf("alice lists %v, %v", l, err)
		}
	})

	t.Run("prompts of a server of the principal's class pass through though none of its tools is visible", func(t *testing.T) {
		ctx := ctxFor(t)
		if _, err := w.St.Registry.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: gatewayworld.TenantA, Subject: "dana",
			Scopes: []string{"audit:read"}, AudienceClasses: []string{gatewayworld.ClassA}}); err != nil {
			t.Fatal(err)
		}
		dana := gatewayworld.Connect(t, w.GatewayURL, w.St.Auth.User(t, "dana", gatewayworld.TenantA, "auditors"), nil)
		servicetest.Eventually(t, 30*time.Second, "dana reads the class's server", func() bool {
			ps, err := dana.ListPrompts(ctxFor(t), nil)
			return err == nil && len(ps.Prompts) == 1 && ps.Prompts[0].Name == gatewayworld.PromptName
		})
		if tl, err := dana.ListTools(ctx, nil); err != nil || len(tl.Tools) != 0 {
			t.Fatalf("dana's tools %v, %v (no tool needs audit:read)", tl, err)
		}
	})

	t.Run("a contract's result budget replaces the gateway's", func(t *testing.T) {
		// 4 KiB of text: export_log's contract sets no budget, so the
		// gateway's 64 KiB applies and the text comes inline.
		inline := call(t, cs, "export_log", map[string]any{"bytes": 4096})
		if inline.IsError || len(inline.Content) != 1 || text(inline) != gatewayworld.ExportLog()[:4096] {
			t.Fatalf("export_log of 4 KiB under the default budget: error %v, %d contents", inline.IsError, len(inline.Content))
		}
		// ping's contract sets 1 KiB: its 4 KiB answer becomes an artifact.
		res := call(t, cs, "ping", map[string]any{"pad": 4096})
		var link *mcp.ResourceLink
		for _, c := range res.Content {
			if l, ok := c.(*mcp.ResourceLink); ok {
				link = l
			}
		}
		if res.IsError || link == nil {
			t.Fatalf("ping of 4 KiB under a 1 KiB contract budget: error %v, no resource link in %d bytes of text", res.IsError, len(text(res)))
		}
		if want := "4100 bytes (sha256:"; !strings.Contains(text(res), want) ||
			!strings.Contains(text(res), fmt.Sprintf("over the %d-byte budget", gatewayworld.PingBudgetBytes)) {
			t.Fatalf("preview %q", text(res)[:200])
		}
		if b, _ := json.Marshal(res); len(b) > 4096 {
			t.Fatalf("the answer has %d bytes, more than the result it stands for", len(b))
		}
		got, err := cs.ReadResource(ctxFor(t), &mcp.ReadResourceParams{URI: link.URI})
		if err != nil || len(got.Contents) != 1 || got.Contents[0].Text != gatewayworld.Pong(4096) {
			t.Fatalf("alice reads the ping artifact: %v", err)
		}
		// A small ping stays inline under the same contract.
		if small := call(t, cs, "ping", nil); small.IsError || text(small) != "pong" {
			t.Fatalf("ping: %q", text(small))
		}
	})

	t.Run("prompts and resources of the servers behind the visible set pass through", func(t *testing.T) {
		ps, err := cs.ListPrompts(ctxFor(t), nil)
		if err != nil || len(ps.Prompts) != 1 || ps.Prompts[0].Name != gatewayworld.PromptName {
			t.Fatalf("alice's prompts %v, %v", ps, err)
		}
		got, err := cs.GetPrompt(ctxFor(t), &mcp.GetPromptParams{Name: gatewayworld.PromptName, Arguments: map[string]string{"shipment_id": "S-7"}})
		if err != nil || len(got.Messages) != 1 || !strings.Contains(got.Messages[0].Content.(*mcp.TextContent).Text, "S-7") {
			t.Fatalf("get prompt: %v %v", got, err)
		}
		rs, err := cs.ListResources(ctxFor(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		var uris []string
		for _, r := range rs.Resources {
			uris = append(uris, r.URI)
		}
		if !slices.Contains(uris, gatewayworld.ResourceURI) {
			t.Fatalf("alice's resources %v", uris)
		}
		rr, err := cs.ReadResource(ctxFor(t), &mcp.ReadResourceParams{URI: gatewayworld.ResourceURI})
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != gatewayworld.WarehousesText {
			t.Fatalf("read %v %v", rr, err)
		}
		bob := gatewayworld.Connect(t, w.GatewayURL, w.Token(t, "bob", gatewayworld.TenantB), nil)
		if ps, err := bob.ListPrompts(ctxFor(t), nil); err != nil || len(ps.Prompts) != 0 {
			t.Fatalf("bob's prompts %v, %v", ps, err)
		}
		_, err = bob.ReadResource(ctxFor(t), &mcp.ReadResourceParams{URI: gatewayworld.ResourceURI})
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) {
			t.Fatalf("bob read a resource of a server behind nothing he sees: %v", err)
		}
		// Not found, as for a URI nobody serves, with the URI itself
		// (not quoted) in data.uri (SEP-2164).
		var data struct{ URI string }
		if rpcErr.Code != mcp.CodeResourceNotFound || json.Unmarshal(rpcErr.Data, &data) != nil || data.URI != gatewayworld.ResourceURI {
			t.Fatalf("bob's read: code %d data %s, want %d with uri %q", rpcErr.Code, rpcErr.Data, mcp.CodeResourceNotFound, gatewayworld.ResourceURI)
		}
		if _, err := bob.GetPrompt(ctxFor(t), &mcp.GetPromptParams{Name: gatewayworld.PromptName, Arguments: map[string]string{"shipment_id": "S-7"}}); err == nil {
			t.Fatal("bob got a prompt of a server behind nothing he sees")
		}
	})

	t.Run("concurrent lists and calls of one principal", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan string, 64)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := gatewayworld.Connect(t, w.GatewayURL, alice, nil)
				for range 4 {
					if _, err := c.ListTools(ctxFor(t), nil); err != nil {
						errs <- err.Error()
					}
					res, err := c.CallTool(ctxFor(t), &mcp.CallToolParams{Name: "shipment_status", Arguments: map[string]any{"shipment_id": fmt.Sprintf("S-C%d", i)}})
					if err != nil {
						errs <- err.Error()
					} else if res.IsError {
						errs <- text(res)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	})

	t.Run("a revoked grant denies the next call POLICY_REVOKED, leaves the list and sends list_changed", func(t *testing.T) {
		changed := make(chan struct{}, 8)
		listener := gatewayworld.Connect(t, w.GatewayURL, alice, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
		if names, _ := listAll(t, listener); !slices.Contains(names, "shipment_status") {
			t.Fatalf("before the revoke: %v", names)
		}
		if _, err := w.St.Registry.RevokeScopes(ctxFor(t), &registryv1.RevokeScopesRequest{TenantId: gatewayworld.TenantA, Group: "readers",
			Scopes: []string{"shipment:read"}}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("no tools/list_changed within 10s of the revoke")
		}
		before := len(callsOf(w, "shipment_status"))
		var res *mcp.CallToolResult
		servicetest.Eventually(t, 30*time.Second, "a denial", func() bool {
			res = call(t, cs, "shipment_status", map[string]any{"shipment_id": "S-1"})
			return res.IsError
		})
		if reason(res) != "POLICY_REVOKED" || !strings.Contains(text(res), "list tools again") {
			t.Fatalf("after the revoke: %q %q", reason(res), text(res))
		}
		if n := len(callsOf(w, "shipment_status")); n != before {
			t.Fatalf("the upstream ran %d calls after the revoke", n-before)
		}
		// The listener was told the list changed: its next list is fresh.
		names, _ := listAll(t, listener)
		if slices.Contains(names, "shipment_status") || !slices.Contains(names, "cancel_shipment") {
			t.Fatalf("after the revoke alice sees %v", names)
		}
	})
}

// TestGatewayFailsClosed: with admission, the lease service or the
// upstream unreachable a call is an error result naming it, never a pass;
// the upstream runs nothing without a lease; once healed, calls run again.
func TestGatewayFailsClosed(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{Proxied: true})
	cs := gatewayworld.Connect(t, w.GatewayURL, w.Token(t, "alice", gatewayworld.TenantA), nil)
	if names, _ := listAll(t, cs); len(names) != 5 {
		t.Fatalf("alice sees %v", names)
	}
	if res := call(t, cs, "shipment_status", map[string]any{"shipment_id": "S-1"}); res.IsError {
		t.Fatalf("healthy: %s", text(res))
	}
	for _, c := range []struct{ proxy, names string }{
		{"admission", "admission"}, {"lease", "lease"}, {"upstream", "the tool's server"},
	} {
		before := len(callsOf(w, "shipment_status"))
		w.Proxy[c.proxy].Sever()
		res := call(t, cs, "shipment_status", map[string]any{"shipment_id": "S-1"})
		if !res.IsError || reason(res) != "UNAVAILABLE" || !strings.Contains(text(res), c.names+" did not answer") {
			t.Fatalf("%s severed: %v %q %q", c.proxy, res.IsError, reason(res), text(res))
		}
		if n := len(callsOf(w, "shipment_status")); n != before {
			t.Fatalf("%s severed: the upstream ran %d calls", c.proxy, n-before)
		}
		if c.proxy == "admission" {
			// A new session: the first may answer from its client-side
			// cache (ttlMs).
			fresh := gatewayworld.Connect(t, w.GatewayURL, w.Token(t, "alice", gatewayworld.TenantA), nil)
			if _, err := fresh.ListTools(ctxFor(t), nil); err == nil || !strings.Contains(err.Error(), "admission") {
				t.Fatalf("tools/list without admission: %v", err)
			}
		}
		w.Proxy[c.proxy].Heal()
		servicetest.Eventually(t, 30*time.Second, c.proxy+" healed", func() bool {
			return !call(t, cs, "shipment_status", map[string]any{"shipment_id": "S-1"}).IsError
		})
	}
}

// TestGatewayWithoutConfirmerTokenDoesNotAsk: a gateway with no
// --confirmer-token-file cannot assert a confirmation (only a confirmer
// may), so a write tool is denied CONFIRMATION_UNANSWERABLE at once: the
// user is never asked a question whose answer could not count, and the
// upstream never runs.
func TestGatewayWithoutConfirmerTokenDoesNotAsk(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{Gateway: func(c *gateway.Config) { c.ConfirmerTokenFile = "" }})
	accept := &elicitation{accept: true}
	cs := gatewayworld.Connect(t, w.GatewayURL, w.Token(t, "alice", gatewayworld.TenantA), &mcp.ClientOptions{ElicitationHandler: accept.handle})
	res := call(t, cs, "cancel_shipment", map[string]any{"shipment_id": "S-9"})
	if !res.IsError || reason(res) != "CONFIRMATION_UNANSWERABLE" || !strings.Contains(text(res), "no confirmer token") {
		t.Fatalf("write tool without a confirmer token: %v %q %q", res.IsError, reason(res), text(res))
	}
	if len(accept.asked()) != 0 || len(callsOf(w, "cancel_shipment")) != 0 {
		t.Fatalf("asked %q, upstream ran %d", accept.asked(), len(callsOf(w, "cancel_shipment")))
	}
}

// TestGatewayFindTools: behind --find-tools, find_tools searches the
// caller's visible set (never another's) and a match is callable by name.
func TestGatewayFindTools(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{Gateway: func(c *gateway.Config) { c.FindTools = true }})
	cs := gatewayworld.Connect(t, w.GatewayURL, w.Token(t, "alice", gatewayworld.TenantA), nil)
	if names, _ := listAll(t, cs); !slices.Contains(names, "find_tools") || len(names) != 6 {
		t.Fatalf("alice sees %v", names)
	}
	find := func(cs *mcp.ClientSession, query string) []string {
		res := call(t, cs, "find_tools", map[string]any{"query": query, "max_tools": 3})
		if res.IsError {
			t.Fatalf("find_tools: %s", text(res))
		}
		var out struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range out.Tools {
			names = append(names, f.Name)
		}
		return names
	}
	found := find(cs, "status of a shipment")
	if len(found) == 0 || found[0] != "shipment_status" {
		t.Fatalf("found %v", found)
	}
	if res := call(t, cs, found[0], map[string]any{"shipment_id": "S-1"}); res.IsError {
		t.Fatalf("calling the match: %s", text(res))
	}
	bob := gatewayworld.Connect(t, w.GatewayURL, w.Token(t, "bob", gatewayworld.TenantB), nil)
	if found := find(bob, "status of a shipment"); len(found) != 0 {
		t.Fatalf("bob of tenant-b found %v", found)
	}
	res := call(t, cs, "find_tools", map[string]any{"query": ""})
	if !res.IsError || reason(res) != "ARGUMENTS_INVALID" {
		t.Fatalf("empty query: %q", text(res))
	}
}

// TestGatewayTypeScriptClient: the TypeScript MCP SDK (from npm, e2e/ts,
// protocol 2025-11-25) is refused without a token, lists the visible set
// over every page, gets a projected read result; without the elicitation
// capability it is told it cannot be asked to confirm a write (nothing
// runs); with it, it is asked by elicitation/create, a decline refuses
// (USER_DECLINED) and an accept runs the write once; another principal
// presenting its session id is refused.
func TestGatewayTypeScriptClient(t *testing.T) {
	if _, err := os.Stat("../ts/node_modules/@modelcontextprotocol/sdk"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("e2e/ts/node_modules is missing: .ci/run installs it with npm ci")
		}
		t.Skip("the TypeScript SDK is not installed: run npm ci in e2e/ts")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed")
	}
	w := gatewayworld.Start(t, gatewayworld.Options{Gateway: func(c *gateway.Config) { c.PageSize = 2 }})
	cmd := exec.CommandContext(ctxFor(t), node, "client.mjs")
	cmd.Dir = "../ts"
	cmd.Env = append(os.Environ(), "GATEWAY_URL="+w.GatewayURL, "GATEWAY_TOKEN="+w.Token(t, "alice", gatewayworld.TenantA),
		"GATEWAY_OTHER_TOKEN="+w.Token(t, "bob", gatewayworld.TenantB))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, stderr.String())
	}
	var out struct {
		Anonymous string   `json:"anonymous"`
		Tools     []string `json:"tools"`
		Pages     int      `json:"pages"`
		Read      struct {
			IsError    bool           `json:"isError"`
			Structured map[string]any `json:"structured"`
			Text       string         `json:"text"`
		} `json:"read"`
		Write struct {
			IsError bool   `json:"isError"`
			Reason  string `json:"reason"`
		} `json:"write"`
		SessionID string `json:"sessionId"`
		Declined  struct {
			IsError bool     `json:"isError"`
			Reason  string   `json:"reason"`
			Asked   []string `json:"asked"`
		} `json:"declined"`
		Confirmed struct {
			IsError bool     `json:"isError"`
			Text    string   `json:"text"`
			Reason  string   `json:"reason"`
			Asked   []string `json:"asked"`
		} `json:"confirmed"`
		Stolen string `json:"stolen"`
	}
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if !strings.Contains(out.Anonymous, "no bearer token") {
		t.Fatalf("without a token: %q", out.Anonymous)
	}
	if want := []string{"cancel_shipment", "export_log", "ping", "shipment_status", "slow_report"}; !slices.Equal(out.Tools, want) || out.Pages != 3 {
		t.Fatalf("tools %v in %d pages", out.Tools, out.Pages)
	}
	if out.Read.IsError || out.Read.Structured["shipment_id"] != "S-TS" || out.Read.Structured["internal_cost"] != nil || strings.Contains(out.Read.Text, "internal_cost") {
		t.Fatalf("read %+v", out.Read)
	}
	if !out.Write.IsError || out.Write.Reason != "CONFIRMATION_UNANSWERABLE" {
		t.Fatalf("write %+v", out.Write)
	}
	if c := callsOf(w, "shipment_status"); len(c) != 1 || c[0].Claims.Subject != "alice" {
		t.Fatalf("upstream calls %+v", c)
	}
	if out.SessionID == "" {
		t.Fatal("the gateway gave the 2025-11-25 client no session")
	}
	if !out.Declined.IsError || out.Declined.Reason != "USER_DECLINED" || len(out.Declined.Asked) != 1 {
		t.Fatalf("declined %+v", out.Declined)
	}
	if out.Confirmed.IsError || out.Confirmed.Text != "cancelled S-TS-OK" || len(out.Confirmed.Asked) != 1 ||
		!strings.Contains(out.Confirmed.Asked[0], "cancel_shipment") || !strings.Contains(out.Confirmed.Asked[0], "WRITE") || !strings.Contains(out.Confirmed.Asked[0], `"S-TS-OK"`) {
		t.Fatalf("confirmed %+v", out.Confirmed)
	}
	if c := callsOf(w, "cancel_shipment"); len(c) != 1 || c[0].Args["shipment_id"] != "S-TS-OK" || c[0].Claims.Subject != "alice" {
		t.Fatalf("cancel_shipment ran %+v", c)
	}
	if !strings.Contains(out.Stolen, "session user mismatch") || strings.Contains(out.Stolen, "served") {
		t.Fatalf("bob presenting alice's session: %q", out.Stolen)
	}
}

// TestGatewayReplicas: two gateway replicas share only Postgres, Redis and
// the cursor key, and that is enough: a cursor from one pages on the other,
// a confirmation asked by one is answered on the other (and only once), an
// artifact stored by one is read on the other.
func TestGatewayReplicas(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{Gateway: func(c *gateway.Config) { c.PageSize = 2 }})
	second := w.StartGateway(t, w.AdmissionAddr, w.LeaseAddr, func(c *gateway.Config) { c.PageSize = 2 })
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	a := gatewayworld.Connect(t, w.GatewayURL, alice, nil)
	b := gatewayworld.Connect(t, second, alice, nil)

	first, err := a.ListTools(ctxFor(t), nil)
	if err != nil || first.NextCursor == "" {
		t.Fatalf("first page on A: %v", err)
	}
	next, err := b.ListTools(ctxFor(t), &mcp.ListToolsParams{Cursor: first.NextCursor})
	if err != nil || len(next.Tools) != 2 || next.Tools[0].Name != "ping" {
		t.Fatalf("A's cursor on B: %v %v", next, err)
	}

	raw := func(url string) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "raw", Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
		cs, err := c.Connect(ctxFor(t), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: gatewayworld.HTTPClient(alice), DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	ra, rb := raw(w.GatewayURL), raw(second)
	args := map[string]any{"shipment_id": "S-R"}
	asked, err := ra.CallTool(ctxFor(t), &mcp.CallToolParams{Name: "cancel_shipment", Arguments: args})
	if err != nil || !asked.NeedsInput() {
		t.Fatalf("A did not ask: %v", err)
	}
	answer := &mcp.CallToolParams{Name: "cancel_shipment", Arguments: args, RequestState: asked.RequestState,
		InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}}
	res, err := rb.CallTool(ctxFor(t), answer)
	if err != nil || res.IsError || text(res) != "cancelled S-R" {
		t.Fatalf("the answer on B: %v %q", err, text(res))
	}
	again, err := ra.CallTool(ctxFor(t), answer)
	if err != nil || !again.IsError || len(callsOf(w, "cancel_shipment")) != 1 {
		t.Fatalf("the same answer again on A: %v %q; upstream ran %d", err, text(again), len(callsOf(w, "cancel_shipment")))
	}

	exp := call(t, a, "export_log", nil)
	if exp.IsError {
		t.Fatalf("export_log on A: %s", text(exp))
	}
	var uri string
	for _, c := range exp.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			uri = l.URI
		}
	}
	got, err := b.ReadResource(ctxFor(t), &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(got.Contents) != 1 || len(got.Contents[0].Text) != gatewayworld.ExportBytes {
		t.Fatalf("A's artifact on B: %v", err)
	}
}
