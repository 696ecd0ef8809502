package mcpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/revision"
	"github.com/toolcrib/toolcrib/services/gateway/internal/bearer"
)

// MetaTool is the `_meta` key of a listed tool's runtime facts (tool id,
// effect class from the reviewed contract, whether a call needs the user's
// confirmation).
const MetaTool = "dev.toolcrib/tool"

// shownTool is one tool as the principal was shown it: the model view as
// listed and the runtime view a call is checked against.
type shownTool struct {
	model *mcp.Tool
	rt    *admissionv1.RuntimeTool
	// epoch is the policy epoch of the listing that showed it.
	epoch int64
}

// visibleSet is one listing of the principal's visible set, frozen.
type visibleSet struct {
	digest string
	epoch  int64
	tools  []*shownTool // in admission's order (by model name)
}

// revision is the cursor revision of a set: the principal and the
// visible-set digest, so a cursor outlives neither.
func (st *state) revision(set *visibleSet) string { return st.key[:16] + "/" + set.digest }

// sync reads the principal's visible set and, when its digest changed,
// replaces the server's tools (which sends list_changed to the principal's
// listeners).
func (g *Gateway) sync(ctx context.Context, st *state, tok string) (*visibleSet, error) {
	resp, err := g.opts.Admission.ListVisibleTools(ctx, &admissionv1.ListVisibleToolsRequest{RunId: st.runID}, withToken(tok))
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	cur := st.set
	if cur != nil && cur.digest == resp.GetVisibleSetDigest() {
		if resp.GetPolicyEpoch() > cur.epoch {
			// The same set at a newer epoch: the principal was shown exactly
			// this at that epoch too.
			cur.epoch = resp.GetPolicyEpoch()
			for _, t := range cur.tools {
				t.epoch = cur.epoch
			}
		}
		st.mu.Unlock()
		return cur, nil
	}
	st.mu.Unlock()

	set := &visibleSet{digest: resp.GetVisibleSetDigest(), epoch: resp.GetPolicyEpoch()}
	for _, vt := range resp.GetTools() {
		if g.opts.FindTools && vt.GetModel().GetName() == FindToolsName {
			continue // the search tool's name is reserved while it is offered
		}
		set.tools = append(set.tools, &shownTool{model: g.modelTool(ctx, vt), rt: vt.GetRuntime(), epoch: set.epoch})
	}
	if g.opts.FindTools {
		set.tools = append(set.tools, &shownTool{model: findTool}) // no runtime view: the gateway answers it
	}

	st.mu.Lock()
	if st.set != nil && st.set.digest == set.digest {
		set = st.set // another request got here first
		st.mu.Unlock()
		return set, nil
	}
	st.set = set
	if len(st.shown) > maxShown {
		clear(st.shown)
	}
	for _, t := range set.tools {
		if t.rt != nil {
			st.shown[t.model.Name] = t
		}
	}
	st.mu.Unlock()
	g.opts.Metrics.Changed()
	g.register(st, set)
	return set, nil
}

// register makes the server's tools exactly set's, unless a newer set has
// been taken meanwhile (its own register call applies it).
func (g *Gateway) register(st *state, set *visibleSet) {
	st.regMu.Lock()
	defer st.regMu.Unlock()
	if st.current() != set {
		return
	}
	want := map[string]*shownTool{}
	for _, t := range set.tools {
		want[t.model.Name] = t
	}
	var gone []string
	for name := range st.registered {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		st.server.RemoveTools(gone...)
	}
	for name, t := range want {
		if old, ok := st.registered[name]; ok && sameRuntime(old.rt, t.rt) {
			continue
		}
		if t.rt == nil {
			st.server.AddTool(t.model, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return g.findTools(ctx, st, req)
			})
			continue
		}
		st.server.AddTool(t.model, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return g.call(ctx, st, req, true)
		})
	}
	st.registered = maps.Clone(want)
}

func sameRuntime(a, b *admissionv1.RuntimeTool) bool {
	return a.GetToolId() == b.GetToolId() && a.GetGeneration() == b.GetGeneration() &&
		a.GetDescriptorDigest() == b.GetDescriptorDigest() && a.GetAudienceClass() == b.GetAudienceClass() &&
		a.GetEffectClass() == b.GetEffectClass() && a.GetConfirmationRequired() == b.GetConfirmationRequired()
}

// modelTool is what the model is shown of vt: admission's model view, the
// title and output schema of the descriptor (when discovery has it), and
// hints derived from the owner-reviewed effect class, never the server's.
func (g *Gateway) modelTool(ctx context.Context, vt *admissionv1.VisibleTool) *mcp.Tool {
	rt := vt.GetRuntime()
	t := &mcp.Tool{
		Name:        vt.GetModel().GetName(),
		Description: vt.GetModel().GetDescription(),
		InputSchema: objectSchema(vt.GetModel().GetInputSchema()),
		Meta: mcp.Meta{MetaTool: map[string]any{
			"tool_id":               rt.GetToolId(),
			"effect_class":          effectName(rt.GetEffectClass()),
			"confirmation_required": rt.GetConfirmationRequired(),
		}},
	}
	effect := rt.GetEffectClass()
	readOnly := effect == catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY
	destructive := effect != catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY && effect != catalogv1.EffectClass_EFFECT_CLASS_RESERVATION &&
		effect != catalogv1.EffectClass_EFFECT_CLASS_WRITE
	t.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: readOnly, DestructiveHint: &destructive}
	if d, err := g.opts.Directory.Descriptor(ctx, rt.GetServerId(), rt.GetAudienceClass(), rt.GetGeneration(), rt.GetDescriptorDigest()); err == nil {
		t.Title = d.Title
		if d.OutputSchema != nil && d.OutputErr == nil && isObjectSchema(d.OutputSchema) {
			t.OutputSchema = d.OutputSchema
		}
	}
	return t
}

func effectName(e catalogv1.EffectClass) string {
	s := e.String()
	const p = "EFFECT_CLASS_"
	if len(s) > len(p) {
		return s[len(p):]
	}
	return s
}

// objectSchema returns raw as an input schema the SDK accepts: a JSON
// object with `type: object` (added when absent; tool arguments are
// always an object).
func objectSchema(raw []byte) json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
		b, _ := json.Marshal(m)
		return b
	}
	if m["type"] != "object" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return raw
}

func isObjectSchema(raw []byte) bool {
	var m map[string]any
	return json.Unmarshal(raw, &m) == nil && m["type"] == "object"
}

// listTools answers tools/list: the first page reads the visible set
// afresh; later pages are cut from the set their cursor was minted for,
// which must still be the principal's current set.
func (g *Gateway) listTools(ctx context.Context, st *state, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	_, tok, ok := bearer.From(req.GetExtra().TokenInfo)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "no verified bearer token"}
	}
	var cursor string
	if req.Params != nil {
		cursor = req.Params.Cursor
	}
	var set *visibleSet
	pos := 0
	if cursor == "" {
		g.opts.Metrics.List()
		s, err := g.sync(ctx, st, tok)
		if err != nil {
			return nil, unavailableList(err)
		}
		set = s
	} else {
		rev, p, err := g.opts.Cursors.Decode(cursor)
		if err != nil || p <= 0 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: list again from the start"}
		}
		st.mu.Lock()
		set = st.set
		st.mu.Unlock()
		if set == nil || st.revision(set) != rev {
			// Another replica may have minted it, or the set moved: read it.
			if set, err = g.sync(ctx, st, tok); err != nil {
				return nil, unavailableList(err)
			}
		}
		if st.revision(set) != rev {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: "the visible set changed since this cursor was made: list again from the start"}
		}
		if p >= len(set.tools) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: list again from the start"}
		}
		pos = p
	}
	end := min(pos+g.opts.PageSize, len(set.tools))
	res := &mcp.ListToolsResult{
		Meta:      mcp.Meta{revision.MetaKey: st.revision(set)},
		Cacheable: mcp.Cacheable{TTLMs: int(g.opts.ListTTL.Milliseconds()), CacheScope: "private"},
		Tools:     make([]*mcp.Tool, 0, end-pos),
	}
	for _, t := range set.tools[pos:end] {
		res.Tools = append(res.Tools, t.model)
	}
	if end < len(set.tools) {
		res.NextCursor = g.opts.Cursors.Encode(st.revision(set), end)
	}
	return res, nil
}

func unavailableList(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("the visible set is not available (admission: %s); nothing is listed rather than a stale set", grpcCode(err))}
}
