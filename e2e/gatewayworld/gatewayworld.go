// Package gatewayworld starts the real registry, discovery, admission,
// lease and gateway services in front of one versioned MCP server that
// verifies leases with the executor kit, for the gateway tests and the
// gateway benchmark.
//
// The server `inventory` has eight tools. For tenant-a's readers (group
// `readers`), shipment_status, cancel_shipment (WRITE: needs the user's
// confirmation), export_log (a 5 MB text, or its first `bytes` bytes; no
// result budget, so the gateway's applies) and ping (no result policy, for
// the benchmark; `pad` adds that many bytes to its answer; its contract's
// result budget is PingBudgetBytes) are approved and enabled; secret_report is published but
// never approved, so nobody sees it; slow_report answers after its
// contract's deadline. For tenant-a's archivists (group `archivists`,
// scope archive:read, which readers lack) shipment_note (a contract with
// allowed fields, answering by `mode` an error result, a text-only result
// or a structured one; see NoteSecret) and archive_export (`bytes` bytes
// of text, up to 64 MiB; see Archive) are approved and enabled.
// tenant-a's class reaches the server with its own credential
// (UpstreamCredential), never the caller's token.
package gatewayworld

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/e2e/stack"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/revision/lease/executor"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/gateway"
	"github.com/toolcrib/toolcrib/services/lease/leaseclient"
)

// The world's names.
const (
	ServerID = "inventory"
	TenantA  = "tenant-a"
	TenantB  = "tenant-b"
	ClassA   = "tenant-a.readers"
	ClassB   = "tenant-b.readers"
	// Audience is the executor audience the gateway's leases name.
	Audience = "executor.inventory"
	// ExportBytes is the size of export_log's result.
	ExportBytes = 5 << 20
)

// PingProgress is how many progress notifications ping sends when its
// caller gives a progress token.
const PingProgress = 3

// Call is one call the upstream ran: the tool and the lease it ran under,
// as the executor kit verified it.
type Call struct {
	Tool   string
	Claims lease.Claims
	Args   map[string]any
}

// World is the running suite.
type World struct {
	St *stack.Stack
	// GatewayURL is the gateway's MCP endpoint; UpstreamURL the MCP
	// server's own (for direct calls, which its executor kit refuses
	// without a lease).
	GatewayURL, UpstreamURL string
	// AdmissionAddr and LeaseAddr are the services' gRPC addresses.
	AdmissionAddr, LeaseAddr string

	// Proxy holds the proxies of a Proxied world: "admission", "lease",
	// "upstream".
	Proxy map[string]*servicetest.Proxy

	upstream *mcp.Server
	stateful bool
	// pingDeadlineMs: [Options.PingDeadlineMs].
	pingDeadlineMs int32
	// pingWithdraw: [Options.PingWithdraw].
	pingWithdraw time.Duration
	// wrapUpstream: [Options.WrapUpstream].
	wrapUpstream func(http.Handler) http.Handler

	// What gateway replicas share.
	gatewayDB, redisPrefix, cursorKeyFile string

	mu    sync.Mutex
	calls []Call
	auths []string // Authorization headers of the upstream's tools/call requests
}

// UpstreamCredential is the audience class's upstream credential (a
// secret reference to an environment variable); the upstream sees only it.
const UpstreamCredential = "class-credential-tenant-a"

// UpstreamAuthorizations returns the Authorization headers the upstream
// received with tools/call requests.
func (w *World) UpstreamAuthorizations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.auths...)
}

// Options adjust the world.
type Options struct {
	// Gateway edits the gateway's configuration before it starts.
	Gateway func(*gateway.Config)
	// Auth is the identity provider of every service and caller; nil means
	// a new [servicetest.NewAuth].
	Auth *servicetest.Auth
	// Proxied puts a severable proxy between the gateway and admission,
	// the lease service and the upstream ([World.Proxy]).
	Proxied bool
	// NoExecutorKit serves the upstream without the executor kit, so a
	// client may call it directly (the benchmark's direct arm calls the
	// same server and tool as the gateway does).
	NoExecutorKit bool
	// StatefulUpstream serves the upstream with the go-sdk's default,
	// stateful handler (sessions), and ping then speaks back to its client
	// ([PingRelay]); the upstream then also has draft_reply
	// ([DraftReply]), whose approved contract allows sampling.
	StatefulUpstream bool
	// PingDeadlineMs, when set, is ping's contract deadline instead of the
	// default 5 s (a test that must tell the gateway ending a call apart
	// from the call's deadline).
	PingDeadlineMs int32
	// PingWithdraw, when set, makes ping on a stateful upstream withdraw
	// its question after this long (its request's context ends, so the
	// upstream sends notifications/cancelled for it).
	PingWithdraw time.Duration
	// WrapUpstream, when set, wraps the upstream's MCP handler (a test
	// that rewrites what the upstream sends, as a hostile server would).
	WrapUpstream func(http.Handler) http.Handler
}

// PingRelay is what ping does on a stateful upstream, beside answering
// pong: it logs [PingInfo] at info and [PingDebug] at debug, asks the
// client [PingQuestion] by elicitation when the client declared it, lists
// its roots when it declared them, and asks for a sampling (which the
// gateway refuses). It records what it got as the call's Args: "elicit"
// (the action and the dock answered, or "error"), "roots" (the URIs),
// "sampling" ("refused" or "answered").
const (
	PingInfo     = "ping info"
	PingDebug    = "ping debug"
	PingQuestion = "Which dock should the pallet go to?"
	// PingDone is ping's last log message (info), sent just before its
	// answer, on every upstream: a stateless (2026-07-28) one logs
	// [PingInfo], [PingDebug] and it only when the request names a level
	// in _meta (else the SDK sends nothing).
	PingDone = "ping done"
)

// DraftReply is a tool of a stateful world's upstream whose approved
// contract allows sampling (shipment:read, READ_ONLY): it asks its client
// for a sampling of DraftPrompt (with includeContext "allServers", which
// the gateway drops), offering the model the tool DraftTool when its
// argument `tools` is true, and records what it got as the call's Args:
// "sampling" is "answered: <the text>" or "refused: <the JSON-RPC error>".
const (
	DraftReply  = "draft_reply"
	DraftPrompt = "Write one sentence telling the customer shipment S-1 is in transit."
	DraftTool   = "lookup_shipment"
)

// UpdateResource has the upstream announce that uri changed, to the
// sessions subscribed to it (a stateful upstream).
func (w *World) UpdateResource(ctx context.Context, uri string) error {
	return w.upstream.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
}

// DropUpstreamSessions ends every session the upstream holds, as a server
// restart or a session timeout would: a client must initialize anew.
func (w *World) DropUpstreamSessions() {
	for ss := range w.upstream.Sessions() {
		_ = ss.Close()
	}
}

// Calls returns the calls the upstream ran so far.
func (w *World) Calls() []Call {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Call(nil), w.calls...)
}

func (w *World) record(ctx context.Context, tool string, args map[string]any) {
	c, _ := executor.FromContext(ctx)
	w.mu.Lock()
	w.calls = append(w.calls, Call{Tool: tool, Claims: c, Args: args})
	w.mu.Unlock()
}

type shipmentIn struct {
	ShipmentID string `json:"shipment_id"`
}

type shipmentOut struct {
	ShipmentID   string  `json:"shipment_id"`
	Status       string  `json:"status"`
	UpdatedAt    string  `json:"updated_at,omitempty"`
	InternalCost float64 `json:"internal_cost"`
}

// The upstream's prompt and resource, passed through to the principals
// behind whose visible set the server is.
const (
	PromptName     = "summarize_shipment"
	ResourceURI    = "inventory://warehouses"
	WarehousesText = "w1 Rotterdam\nw2 Hamburg\n"
)

// NoEvidence is the shipment id for which shipment_status leaves out
// updated_at, a required-evidence field.
const NoEvidence = "S-NO-EVIDENCE"

var shipmentOutSchema = map[string]any{"type": "object", "properties": map[string]any{
	"shipment_id": map[string]any{"type": "string"}, "status": map[string]any{"type": "string"},
	"updated_at": map[string]any{"type": "string"}, "internal_cost": map[string]any{"type": "number"}},
	"required": []string{"shipment_id", "status"}}

var shipmentInSchema = map[string]any{"type": "object", "properties": map[string]any{"shipment_id": map[string]any{"type": "string"}},
	"required": []string{"shipment_id"}}

// startUpstream serves the inventory server on loopback: revision-bound
// catalog and, with kit, the executor kit verifying every call's lease
// against the real lease service.
func (w *World) startUpstream(t testing.TB, leaseAddr string, kit bool) string {
	t.Helper()
	opts := &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true},
			Prompts: &mcp.PromptCapabilities{}, Resources: &mcp.ResourceCapabilities{}, Logging: &mcp.LoggingCapabilities{}}}
	if w.stateful {
		// Subscriptions are recorded by the SDK ([World.UpdateResource]).
		opts.Capabilities.Resources.Subscribe = true
		opts.SubscribeHandler = func(context.Context, *mcp.SubscribeRequest) error { return nil }
		opts.UnsubscribeHandler = func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "inventory", Version: "1.0.0"}, opts)
	server.AddPrompt(&mcp.Prompt{Name: PromptName, Description: "Summarize one shipment for a customer.",
		Arguments: []*mcp.PromptArgument{{Name: "shipment_id", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: &mcp.TextContent{Text: "Summarize shipment " + req.Params.Arguments["shipment_id"] + " for its customer."}}}}, nil
		})
	server.AddResource(&mcp.Resource{URI: ResourceURI, Name: "warehouses", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: ResourceURI, MIMEType: "text/plain", Text: WarehousesText}}}, nil
		})
	catalog, err := revision.New(server, revision.Options{Key: []byte("gatewayworld-cursor-key"), PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	catalog.AddTool(&mcp.Tool{Name: "shipment_status", Description: "Query the current status of a shipment.",
		InputSchema: shipmentInSchema, OutputSchema: shipmentOutSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in shipmentIn
			_ = jsonUnmarshal(req.Params.Arguments, &in)
			w.record(ctx, "shipment_status", map[string]any{"shipment_id": in.ShipmentID})
			out := shipmentOut{ShipmentID: in.ShipmentID, Status: "in_transit", UpdatedAt: "2026-12-01T10:00:00Z", InternalCost: 12.5}
			if in.ShipmentID == NoEvidence {
				out.UpdatedAt = ""
			}
			return structured(out)
		})
	catalog.AddTool(&mcp.Tool{Name: "cancel_shipment", Description: "Cancel a shipment that has not left the warehouse.",
		InputSchema: shipmentInSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in shipmentIn
			_ = jsonUnmarshal(req.Params.Arguments, &in)
			w.record(ctx, "cancel_shipment", map[string]any{"shipment_id": in.ShipmentID})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "cancelled " + in.ShipmentID}}}, nil
		})
	catalog.AddTool(&mcp.Tool{Name: "export_log", Description: "Export the warehouse log as text.",
		InputSchema: sizedSchema("bytes")},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			w.record(ctx, "export_log", nil)
			var in struct {
				Bytes int `json:"bytes"`
			}
			_ = jsonUnmarshal(req.Params.Arguments, &in)
			log := ExportLog()
			if in.Bytes > 0 && in.Bytes < len(log) {
				log = log[:in.Bytes]
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: log}}}, nil
		})
	catalog.AddTool(&mcp.Tool{Name: "ping", Description: "Answer pong.", InputSchema: sizedSchema("pad")},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Pad int `json:"pad"`
			}
			_ = jsonUnmarshal(req.Params.Arguments, &in)
			// Given a progress token, it reports [PingProgress] steps first.
			if pt := req.Params.GetProgressToken(); pt != nil {
				for i := range PingProgress {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: pt, Progress: float64(i + 1), Total: PingProgress, Message: fmt.Sprintf("step %d", i+1)})
				}
			}
			if w.stateful {
				w.record(ctx, "ping", pingRelay(ctx, req.Session, w.pingWithdraw))
			} else {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "ping", Data: PingInfo})
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Logger: "ping", Data: PingDebug})
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "ping", Data: PingDone})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: Pong(in.Pad)}}}, nil
		})
	if w.stateful {
		catalog.AddTool(&mcp.Tool{Name: DraftReply, Description: "Draft a reply to a customer with the client's model.",
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{"tools": map[string]any{"type": "boolean"}}}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var in struct {
					Tools bool `json:"tools"`
				}
				_ = jsonUnmarshal(req.Params.Arguments, &in)
				p := &mcp.CreateMessageWithToolsParams{MaxTokens: 64, IncludeContext: "allServers",
					Messages: []*mcp.SamplingMessageV2{{Role: "user", Content: []mcp.Content{&mcp.TextContent{Text: DraftPrompt}}}}}
				if in.Tools {
					p.Tools = []*mcp.Tool{{Name: DraftTool, InputSchema: map[string]any{"type": "object"}}}
				}
				res, err := req.Session.CreateMessageWithTools(ctx, p)
				got := "refused: "
				if err != nil {
					got += err.Error()
				} else {
					got = fmt.Sprintf("answered with %d contents", len(res.Content))
					if len(res.Content) == 1 {
						if tc, ok := res.Content[0].(*mcp.TextContent); ok {
							got = "answered: " + tc.Text
						}
					}
				}
				w.record(ctx, DraftReply, map[string]any{"sampling": got})
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: got}}}, nil
			})
	}
	catalog.AddTool(&mcp.Tool{Name: "slow_report", Description: "Compile a report slowly.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			w.record(ctx, "slow_report", nil)
			select {
			case <-ctx.Done():
			case <-time.After(3 * time.Second):
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil
		})
	catalog.AddTool(&mcp.Tool{Name: "shipment_note", Description: "Read the note on a shipment.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"mode": map[string]any{"enum": []string{NoteError, NoteText, NoteStructured}}}}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Mode string `json:"mode"`
			}
			_ = jsonUnmarshal(req.Params.Arguments, &in)
			w.record(ctx, "shipment_note", map[string]any{"mode": in.Mode})
			switch in.Mode {
			case NoteError:
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "lookup failed: " + NoteSecret}},
					StructuredContent: map[string]any{"code": NoteErrorCode, "detail": NoteSecret}}, nil
			case NoteText:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "note: fragile; " + NoteSecret}}}, nil
			}
			return structured(map[string]any{"note": "fragile", "internal": NoteSecret})
		})
	catalog.AddTool(&mcp.Tool{Name: "archive_export", Description: "Export the archive as text.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"bytes": map[string]any{"type": "integer", "minimum": 0, "maximum": 64 << 20}}}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Bytes int `json:"bytes"`
			}
			_ = jsonUnmarshal(req.Params.Arguments, &in)
			w.record(ctx, "archive_export", map[string]any{"bytes": in.Bytes})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: Archive(in.Bytes)}}}, nil
		})
	catalog.AddTool(&mcp.Tool{Name: "secret_report", Description: "Report every shipment's cost.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			w.record(ctx, "secret_report", nil)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "costs"}}}, nil
		})
	if kit {
		lc := leaseclient.New(leasev1.NewLeaseServiceClient(servicetest.Dial(t, leaseAddr, w.St.Auth.Service(t))), 0)
		if err := executor.Require(server, executor.Options{ServerID: ServerID, Audience: Audience, Keys: lc.Keys, RefreshKeys: lc.Refresh, Redeemer: lc}); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	w.upstream = server
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: !w.stateful})
	if w.wrapUpstream != nil {
		h = w.wrapUpstream(h)
	}
	mux.Handle("/mcp", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				w.mu.Lock()
				w.auths = append(w.auths, r.Header.Get("Authorization"))
				w.mu.Unlock()
			}
		}
		h.ServeHTTP(rw, r)
	}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// pingRelay is ping's [PingRelay] part.
func pingRelay(ctx context.Context, ss *mcp.ServerSession, withdraw time.Duration) map[string]any {
	got := map[string]any{}
	_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "ping", Data: PingInfo})
	_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Logger: "ping", Data: PingDebug})
	caps := &mcp.ClientCapabilities{}
	if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
		caps = ip.Capabilities
	}
	if caps.Elicitation != nil {
		ectx := ctx
		if withdraw > 0 {
			var cancel context.CancelFunc
			ectx, cancel = context.WithTimeout(ctx, withdraw)
			defer cancel()
		}
		res, err := ss.Elicit(ectx, &mcp.ElicitParams{Message: PingQuestion, RequestedSchema: map[string]any{"type": "object",
			"properties": map[string]any{"dock": map[string]any{"type": "string"}}}})
		switch {
		case err != nil && ctx.Err() != nil:
			got["elicit"] = "cancelled"
		case err != nil:
			got["elicit"] = "error"
		default:
			dock, _ := res.Content["dock"].(string)
			got["elicit"] = res.Action + " " + dock
		}
	}
	if caps.RootsV2 != nil || caps.Roots.ListChanged {
		if res, err := ss.ListRoots(ctx, nil); err == nil {
			var uris []string
			for _, r := range res.Roots {
				uris = append(uris, r.URI)
			}
			got["roots"] = strings.Join(uris, ",")
		} else {
			got["roots"] = "error"
		}
	}
	if _, err := ss.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}); err != nil {
		got["sampling"] = "refused"
	} else {
		got["sampling"] = "answered"
	}
	return got
}

func jsonUnmarshal(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// structured answers v as structured content with its JSON as text, as
// go-sdk servers do.
func structured(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
}

// sizedSchema is the input schema of a tool whose answer's size an
// optional integer argument sets.
func sizedSchema(arg string) map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{
		arg: map[string]any{"type": "integer", "minimum": 0, "maximum": 1 << 20}}}
}

// shipment_note's modes and what its upstream answers carry.
const (
	// NoteError answers an error result whose text and structured content
	// carry NoteSecret, with the code NoteErrorCode.
	NoteError = "error"
	// NoteText answers a text-only result carrying NoteSecret.
	NoteText = "text"
	// NoteStructured answers {"note": "fragile", "internal": NoteSecret};
	// the contract allows only note.
	NoteStructured = "structured"
	// NoteSecret is what the contract never lets through.
	NoteSecret = "db=postgres://archive:hunter2@10.0.0.7/notes"
	// NoteErrorCode is the code of NoteError's result.
	NoteErrorCode = "notes.locked"
)

// Archive is archive_export's answer of n bytes.
func Archive(n int) string {
	const line = "2026-12-01 archive entry ........................................\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

// Pong is ping's answer with pad bytes of padding.
func Pong(pad int) string { return "pong" + strings.Repeat(".", min(max(pad, 0), 1<<20)) }

// PingBudgetBytes is ping's contract result budget: a ping answer larger
// than this becomes an artifact, though it is far below the gateway's
// default budget.
const PingBudgetBytes = 1024

// ExportLog is export_log's result: ExportBytes of log lines.
func ExportLog() string {
	line := "2026-12-01T10:00:00Z warehouse=w1 event=scan sku=A-100 qty=1\n"
	var b strings.Builder
	b.Grow(ExportBytes)
	for b.Len()+len(line) <= ExportBytes {
		b.WriteString(line)
	}
	b.WriteString(strings.Repeat("#", ExportBytes-b.Len()))
	return b.String()
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// StartServices runs the registry, discovery, admission and lease until
// the test ends, with no MCP server registered and no gateway yet
// ([World.StartGateway]).
func StartServices(t testing.TB) *World { return startServices(t, nil) }

func startServices(t testing.TB, auth *servicetest.Auth) *World {
	t.Helper()
	st := stack.Start(t, stack.Options{Discovery: func(c *discovery.Config) { c.Linger = 0 }, Auth: auth})
	w := &World{St: st}
	w.AdmissionAddr = st.StartAdmission(t, st.AdmissionConfig(t), stack.AdmissionDB(t), nil)
	w.LeaseAddr = st.StartLease(t, st.LeaseConfig(t, w.AdmissionAddr, ""), stack.LeaseDB(t), nil)
	return w
}

// Start runs the world until the test ends.
func Start(t testing.TB, opts Options) *World {
	t.Helper()
	ctx := ctxFor(t)
	// Admission and lease first: the upstream's executor kit needs the
	// lease service's keys.
	w := startServices(t, opts.Auth)
	st := w.St
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	w.stateful, w.pingDeadlineMs, w.pingWithdraw = opts.StatefulUpstream, opts.PingDeadlineMs, opts.PingWithdraw
	w.wrapUpstream = opts.WrapUpstream
	w.UpstreamURL = w.startUpstream(t, w.LeaseAddr, !opts.NoExecutorKit)
	registered := w.UpstreamURL
	gatewayAdmission, gatewayLease := w.AdmissionAddr, w.LeaseAddr
	if opts.Proxied {
		w.Proxy = map[string]*servicetest.Proxy{}
		hostPort := strings.TrimSuffix(strings.TrimPrefix(w.UpstreamURL, "http://"), "/mcp")
		for name, addr := range map[string]string{"admission": w.AdmissionAddr, "lease": w.LeaseAddr, "upstream": hostPort} {
			w.Proxy[name] = servicetest.NewProxy(t, addr)
		}
		registered = "http://" + w.Proxy["upstream"].Addr() + "/mcp"
		gatewayAdmission, gatewayLease = w.Proxy["admission"].Addr(), w.Proxy["lease"].Addr()
	}
	// The class's upstream credential: a secret reference the gateway
	// resolves (discovery too, when it scans).
	t.Setenv("TOOLCRIB_SECRET_INVENTORY_A", UpstreamCredential)

	reg := st.Registry
	must(reg.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: ServerID, Owner: TenantA + "/group:inventory-team",
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: registered}},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		ScanInterval:   durationpb.New(time.Hour),
	}}))
	for _, tc := range [][3]string{{TenantA, ClassA, "env:TOOLCRIB_SECRET_INVENTORY_A"}, {TenantB, ClassB, ""}} {
		must(reg.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tc[0]}}))
		must(reg.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
			Name: tc[1], TenantId: tc[0], Servers: []*registryv1.AudienceServer{{ServerId: ServerID, SecretRef: tc[2]}}}}))
	}
	must(reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: TenantA, Group: "readers",
		Scopes: []string{"shipment:read", "shipment:write"}, AudienceClasses: []string{ClassA}}))
	must(reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: TenantA, Group: "archivists",
		Scopes: []string{"archive:read"}, AudienceClasses: []string{ClassA}}))
	must(st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: ServerID, AudienceClass: ClassA}))
	WaitActive(t, ctx, st.Discovery, ServerID, ClassA)
	servicetest.Eventually(t, 30*time.Second, "the registry learns the tools", func() bool {
		_, err := reg.GetTool(ctx, &registryv1.GetToolRequest{ToolId: ServerID + ".secret_report"})
		return err == nil
	})
	read, write := catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, catalogv1.EffectClass_EFFECT_CLASS_WRITE
	type contractRow = struct {
		tool     string
		effect   catalogv1.EffectClass
		scope    string
		allowed  []string
		evidence []string
		approve  bool
	}
	rows := []contractRow{
		{"shipment_status", read, "shipment:read", []string{"shipment_id", "status", "updated_at"}, []string{"shipment_id", "updated_at"}, true},
		{"cancel_shipment", write, "shipment:write", nil, nil, true},
		{"export_log", read, "shipment:read", nil, nil, true},
		{"ping", read, "shipment:read", nil, nil, true},
		{"slow_report", read, "shipment:read", nil, nil, true},
		{"shipment_note", read, "archive:read", []string{"note"}, nil, true},
		{"archive_export", read, "archive:read", nil, nil, true},
		{"secret_report", read, "shipment:read", nil, nil, false},
	}
	if w.stateful {
		rows = append(rows, contractRow{DraftReply, read, "shipment:read", nil, nil, true})
	}
	for _, c := range rows {
		pub, err := reg.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
			ToolId: ServerID + "." + c.tool, Effect: c.effect, Scope: c.scope, DeadlineMs: w.deadline(c.tool),
			Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT,
			AllowedFields: c.allowed, RequiredEvidence: c.evidence, ResultBudgetBytes: resultBudget(c.tool),
			AllowSampling: c.tool == DraftReply,
		}})
		if err != nil {
			t.Fatalf("publish %s: %v", c.tool, err)
		}
		if !c.approve {
			continue
		}
		must(reg.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: ServerID + "." + c.tool, ApprovalDigest: pub.GetTool().GetApprovalDigest()}))
		must(reg.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: ServerID + "." + c.tool}))
	}

	w.StartGateway(t, gatewayAdmission, gatewayLease, opts.Gateway)
	return w
}

// StartGateway runs a gateway replica in front of the world's services
// (dialing admission and the lease service at the given addresses) until
// the test ends and returns its MCP URL; the first replica's is also
// GatewayURL. Replicas share what replicas share in production, and
// nothing else: the gateway database, the Redis prefix and the cursor key
// file. edit, if set, adjusts the configuration.
func (w *World) StartGateway(t testing.TB, admissionAddr, leaseAddr string, edit func(*gateway.Config)) string {
	t.Helper()
	st := w.St
	if w.gatewayDB == "" {
		w.gatewayDB = pgtest.NewDatabase(t, pgtest.Schema{Name: gateway.Schema, Sets: gateway.Migrations()})
		w.cursorKeyFile = filepath.Join(t.TempDir(), "cursor-key")
		w.redisPrefix = st.Auth.Common(t, w.gatewayDB, true, nil).RedisPrefix
	}
	gcfg, err := gateway.ParseConfig([]string{"--cursor-key-file", w.cursorKeyFile, "--mcp-listen", "127.0.0.1:0"},
		func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	gcfg.AdmissionAddr, gcfg.LeaseAddr, gcfg.RegistryAddr, gcfg.DiscoveryAddr = admissionAddr, leaseAddr, st.RegistryAddr, st.DiscoveryAddr
	// The gateway's own confirmer token (the confirmer group of the
	// platform tenant), as dev up gives it.
	gcfg.ConfirmerTokenFile = filepath.Join(t.TempDir(), "confirmer-token")
	if err := os.WriteFile(gcfg.ConfirmerTokenFile, []byte(st.Auth.Confirmer(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	gcfg.Egress.AllowLoopback = true
	gcfg.WatchInterval = 100 * time.Millisecond
	if edit != nil {
		edit(&gcfg)
	}
	urlc := make(chan string, 1)
	servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := gcfg
		c.Common = st.Auth.Common(t, w.gatewayDB, true, listening)
		c.RedisPrefix, c.RedisAckReplicas = w.redisPrefix, gcfg.RedisAckReplicas
		c.Ready = func(u string) { urlc <- u }
		if err := c.Validate(); err != nil {
			return err
		}
		return gateway.Run(ctx, c)
	})
	u := <-urlc
	if w.GatewayURL == "" {
		w.GatewayURL = u
	}
	return u
}

func resultBudget(tool string) int64 {
	if tool == "ping" {
		return PingBudgetBytes
	}
	return 0
}

// SlowDeadlineMs is slow_report's contract deadline; it answers after 3 s.
const SlowDeadlineMs = 300

func (w *World) deadline(tool string) int32 {
	switch tool {
	case "ping":
		if w.pingDeadlineMs > 0 {
			return w.pingDeadlineMs
		}
	case "slow_report":
		return SlowDeadlineMs
	case "export_log":
		return 60000 // 5 MB through JSON twice, under -race on a shared machine
	case "archive_export":
		return 180000 // up to 64 MiB through JSON twice, under -race
	}
	return 5000
}

// WaitActive polls until (server, class) has an active generation. (It
// polls GetActiveSnapshot rather than following Watch, whose start-up is
// not what these tests are about.)
// When none comes it fails naming the pair's last runs (state, reason,
// detail), so a failure says what discovery saw.
func WaitActive(t testing.TB, ctx context.Context, d discoveryv1.DiscoveryServiceClient, server, class string) {
	t.Helper()
	// A first scan of a server started with the test (an npm server's
	// node process among them) on a CI machine running other packages'
	// tests at once: 30 s was once not enough (CI at 476852c).
	const within = 60 * time.Second
	deadline := time.Now().Add(within)
	for {
		resp, err := d.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: server, AudienceClass: class})
		if err == nil && resp.GetPointer().GetState() == discoveryv1.PointerState_POINTER_STATE_ACTIVE {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	runs, err := d.ListRuns(ctx, &discoveryv1.ListRunsRequest{ServerId: server, AudienceClass: class, PageSize: 5})
	seen := ""
	for _, r := range runs.GetRuns() {
		seen += fmt.Sprintf("\n  run %s attempt %d started %s: %v %v %q", r.GetRunId(), r.GetAttempt(),
			r.GetStartedAt().AsTime().Format(time.RFC3339Nano), r.GetState(), r.GetReason(), r.GetDetail())
	}
	if err != nil {
		seen = "\n  (ListRuns: " + err.Error() + ")"
	}
	t.Fatalf("an active generation of %s for %s: not within %v; its last runs:%s", server, class, within, seen)
}

// Archivist mints a token of subject in tenant, group archivists (who see
// shipment_note and archive_export, and nothing readers see).
func (w *World) Archivist(t testing.TB, subject, tenant string) string {
	return w.St.Auth.User(t, subject, tenant, "archivists")
}

// Token mints a token of subject in tenant, group readers.
func (w *World) Token(t testing.TB, subject, tenant string) string {
	return w.St.Auth.User(t, subject, tenant, "readers")
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct {
	base  http.RoundTripper
	token string
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// HTTPClient returns an HTTP client presenting token (none when empty).
func HTTPClient(token string) *http.Client {
	if token == "" {
		return &http.Client{}
	}
	return &http.Client{Transport: bearerTransport{base: http.DefaultTransport, token: token}}
}

// Connect connects a go-sdk MCP client to url presenting token, with opts
// (nil: defaults), closed when the test ends.
func Connect(t testing.TB, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return ConnectAt(t, url, token, opts, "")
}

// ConnectAt is [Connect] asking for protocol version (empty: the latest).
func ConnectAt(t testing.TB, url, token string, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "gateway-test", Version: "1.0.0"}, opts)
	cs, err := c.Connect(ctxFor(t), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: HTTPClient(token), DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// Text is the text content of a tool result, its text parts joined.
func Text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Fronted names an unversioned HTTP MCP server the gateway fronts for one
// tenant ([World.Front]).
type Fronted struct {
	// ServerID is registered at URL, owned by Tenant's group Group.
	ServerID, URL string
	// Tenant's audience class Class holds the server; Group is granted
	// Scope on it.
	Tenant, Class, Group, Scope string
}

// Front registers f's server (first party, no catalog revision), its
// tenant and audience class, grants f.Scope to f.Group, scans it and waits
// until its snapshot is active and the registry has learned its tools.
// Contracts, approvals and the gateway are the caller's.
func (w *World) Front(t testing.TB, ctx context.Context, f Fronted) {
	t.Helper()
	reg := w.St.Registry
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(reg.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: f.ServerID, Owner: f.Tenant + "/group:" + f.Group,
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: f.URL}},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_NONE,
		ScanInterval:   durationpb.New(time.Hour),
	}}))
	must(reg.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: f.Tenant}}))
	must(reg.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: f.Class, TenantId: f.Tenant, Servers: []*registryv1.AudienceServer{{ServerId: f.ServerID}}}}))
	must(reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: f.Tenant, Group: f.Group, Scopes: []string{f.Scope}, AudienceClasses: []string{f.Class}}))
	must(w.St.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: f.ServerID, AudienceClass: f.Class}))
	WaitActive(t, ctx, w.St.Discovery, f.ServerID, f.Class)
	servicetest.Eventually(t, 30*time.Second, "the registry learns the tools", func() bool {
		resp, err := reg.ListTools(ctx, &registryv1.ListToolsRequest{ServerId: f.ServerID})
		return err == nil && len(resp.GetTools()) > 0
	})
}
