package mcpapi

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/services/gateway/internal/bearer"
)

// Prompts and resources of the servers of the principal's audience classes
// pass through read-only: listed from each (server, audience class) the
// principal reads now (see [Gateway.sources]) with the class's credential,
// namespaced on collision, and read or got through the same session.
// Servers of classes the principal does not hold are never asked.

// Caps of one passthrough listing.
const (
	maxPassPages = 20
	maxPassItems = 1000
)

// upstreamURIPrefix starts the URI of an upstream resource whose own URI
// collides with another server's.
const upstreamURIPrefix = "toolcrib-upstream://"

type source struct{ server, class string }

type promptRef struct {
	src  source
	name string
}

type resourceRef struct {
	src source
	uri string
}

// sources are the (server, class) pairs the principal reads now through
// its audience classes (admission's ListVisibleTools servers: open, fresh,
// served to it by the rollout stage), read afresh; a server none of whose
// tools the principal may call still passes its prompts and resources
// through, read-only.
func (g *Gateway) sources(ctx context.Context, st *state, tok string) ([]source, error) {
	resp, err := g.opts.Admission.ListVisibleTools(ctx, &admissionv1.ListVisibleToolsRequest{MaxTools: 1, RunId: st.runID}, withToken(tok))
	if err != nil {
		return nil, err
	}
	var out []source
	for _, sv := range resp.GetServers() {
		s := source{sv.GetServerId(), sv.GetAudienceClass()}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

func (g *Gateway) session(ctx context.Context, s source) (*mcp.ClientSession, error) {
	ep, err := g.opts.Directory.Endpoint(ctx, s.server, s.class)
	if err != nil {
		return nil, err
	}
	return g.opts.Upstream.Session(ctx, ep.Target())
}

// listPrompts answers prompts/list with the upstreams' prompts; a name two
// servers share is given as `<server>__<name>`.
func (g *Gateway) listPrompts(ctx context.Context, st *state, req *mcp.ListPromptsRequest) (*mcp.ListPromptsResult, error) {
	_, tok, ok := bearer.From(req.GetExtra().TokenInfo)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "no verified bearer token"}
	}
	srcs, err := g.sources(ctx, st, tok)
	if err != nil {
		return nil, unavailableList(err)
	}
	type item struct {
		src source
		p   *mcp.Prompt
	}
	var items []item
	count := map[string]int{}
	for _, s := range srcs {
		cs, err := g.session(ctx, s)
		if err != nil {
			g.opts.Logger.WarnContext(ctx, "prompts passthrough: server not reachable; left out", "server", s.server, "error", err)
			continue
		}
		if ir := cs.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Prompts == nil {
			continue
		}
		cursor := ""
		for range maxPassPages {
			res, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				g.opts.Logger.WarnContext(ctx, "prompts passthrough: list failed; left out", "server", s.server, "error", err)
				break
			}
			for _, p := range res.Prompts {
				if len(items) < maxPassItems {
					items = append(items, item{s, p})
					count[p.Name]++
				}
			}
			if res.NextCursor == "" || len(items) >= maxPassItems {
				break
			}
			cursor = res.NextCursor
		}
	}
	refs := map[string]promptRef{}
	out := &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{}, Cacheable: mcp.Cacheable{TTLMs: int(g.opts.ListTTL.Milliseconds()), CacheScope: "private"}}
	for _, it := range items {
		name := it.p.Name
		if count[name] > 1 {
			name = it.src.server + "__" + name
		}
		p := *it.p
		p.Name = name
		refs[name] = promptRef{it.src, it.p.Name}
		out.Prompts = append(out.Prompts, &p)
	}
	st.mu.Lock()
	st.prompts = refs
	st.mu.Unlock()
	return out, nil
}

// getPrompt answers prompts/get through the server that listed the prompt.
func (g *Gateway) getPrompt(ctx context.Context, st *state, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	if req.Params == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
	}
	st.mu.Lock()
	ref, ok := st.prompts[req.Params.Name]
	st.mu.Unlock()
	if !ok {
		// Listed on another replica, or not yet: list once.
		if _, err := g.listPrompts(ctx, st, &mcp.ListPromptsRequest{Session: req.Session, Extra: req.Extra}); err != nil {
			return nil, err
		}
		st.mu.Lock()
		ref, ok = st.prompts[req.Params.Name]
		st.mu.Unlock()
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown prompt " + quoteBounded(req.Params.Name)}
		}
	}
	bind := passBinding(st, "prompt", ref.src, ref.name)
	rs, upState, err := g.roundIn(ctx, req.Params.RequestState, req.Params.InputResponses, bind)
	if err != nil {
		return nil, err
	}
	cs, err := g.session(ctx, ref.src)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the prompt's server did not answer"}
	}
	params := &mcp.GetPromptParams{Name: ref.name, Arguments: req.Params.Arguments, InputResponses: rs, RequestState: upState,
		Meta: mcp.Meta{mcp.MetaKeyClientCapabilities: forwardedCapabilities(req.ClientCapabilities(), false)}}
	res, err := cs.GetPrompt(ctx, params)
	if jerr := passedError(err, rs != nil || upState != ""); jerr != nil {
		return nil, jerr
	}
	if err != nil || !res.NeedsInput() {
		return res, err
	}
	reqs, sealed, err := g.inputPassThrough(ctx, req.Session, "server "+ref.src.server+", prompt "+ref.name, res.InputRequests, upstreamRecord{Binding: bind, State: res.RequestState}, nil)
	if err != nil {
		return nil, err
	}
	return &mcp.GetPromptResult{InputRequests: reqs, RequestState: sealed}, nil
}

// passBinding is what an upstream state of a prompt or resource read is
// bound to: the principal and run, the kind, the (server, class) and the
// upstream's name or URI.
func passBinding(st *state, kind string, src source, name string) string {
	return strings.Join([]string{st.key, kind, src.server, src.class, name}, "\x00")
}

// roundIn is what goes upstream of a prompts/get or resources/read that
// answers an input-required result: the client's input responses and the
// upstream's state unwrapped from the gateway's (none on a first round).
// A state the gateway did not issue for this request is a JSON-RPC error.
func (g *Gateway) roundIn(ctx context.Context, state string, responses mcp.InputResponseMap, bind string) (mcp.InputResponseMap, string, error) {
	if state == "" {
		return responses, "", nil
	}
	rec, err := g.openUpstreamState(ctx, state, bind)
	if err != nil {
		return nil, "", err
	}
	return responses, rec.State, nil
}

// upstreamResources lists the upstreams' resources for the principal and
// remembers where each came from; a URI two servers share is given as
// `toolcrib-upstream://<server>?uri=<uri>`.
func (g *Gateway) upstreamResources(ctx context.Context, st *state, tok string) ([]*mcp.Resource, error) {
	srcs, err := g.sources(ctx, st, tok)
	if err != nil {
		return nil, err
	}
	refs := map[string]resourceRef{}
	var out []*mcp.Resource
	for _, s := range srcs {
		cs, err := g.session(ctx, s)
		if err != nil {
			g.opts.Logger.WarnContext(ctx, "resources passthrough: server not reachable; left out", "server", s.server, "error", err)
			continue
		}
		if ir := cs.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Resources == nil {
			continue
		}
		cursor := ""
		for range maxPassPages {
			res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				g.opts.Logger.WarnContext(ctx, "resources passthrough: list failed; left out", "server", s.server, "error", err)
				break
			}
			for _, r := range res.Resources {
				if len(out) >= maxPassItems {
					break
				}
				uri := r.URI
				if _, taken := refs[uri]; taken || isGatewayURI(uri) {
					uri = upstreamURIPrefix + url.PathEscape(s.server) + "?uri=" + url.QueryEscape(r.URI)
				}
				c := *r
				c.URI = uri
				refs[uri] = resourceRef{s, r.URI}
				out = append(out, &c)
			}
			if res.NextCursor == "" || len(out) >= maxPassItems {
				break
			}
			cursor = res.NextCursor
		}
	}
	st.mu.Lock()
	st.resources = refs
	st.mu.Unlock()
	return out, nil
}

// readUpstream answers resources/read of an upstream resource through the
// server that listed it.
func (g *Gateway) readUpstream(ctx context.Context, st *state, req *mcp.ReadResourceRequest, uri string) (*mcp.ReadResourceResult, error) {
	st.mu.Lock()
	ref, ok := st.resources[uri]
	st.mu.Unlock()
	if !ok {
		_, tok, okTok := bearer.From(req.GetExtra().TokenInfo)
		if !okTok {
			return nil, mcp.ResourceNotFoundError(bounded(uri, 256))
		}
		if _, err := g.upstreamResources(ctx, st, tok); err != nil {
			return nil, unavailableList(err)
		}
		st.mu.Lock()
		ref, ok = st.resources[uri]
		st.mu.Unlock()
		if !ok {
			// A URI of a listed template reads from the template's server.
			src, found := st.templateSource(uri)
			if !found {
				if _, err := g.upstreamTemplates(ctx, st, tok); err != nil {
					return nil, unavailableList(err)
				}
				src, found = st.templateSource(uri)
			}
			if !found {
				return nil, mcp.ResourceNotFoundError(bounded(uri, 256))
			}
			ref = resourceRef{src: src, uri: uri}
		}
	}
	bind := passBinding(st, "resource", ref.src, ref.uri)
	rs, upState, err := g.roundIn(ctx, req.Params.RequestState, req.Params.InputResponses, bind)
	if err != nil {
		return nil, err
	}
	cs, err := g.session(ctx, ref.src)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the resource's server did not answer"}
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: ref.uri, InputResponses: rs, RequestState: upState,
		Meta: mcp.Meta{mcp.MetaKeyClientCapabilities: forwardedCapabilities(req.ClientCapabilities(), false)}})
	if jerr := passedError(err, rs != nil || upState != ""); jerr != nil {
		return nil, jerr
	}
	if err != nil {
		return nil, err
	}
	if res.NeedsInput() {
		reqs, sealed, err := g.inputPassThrough(ctx, req.Session, "server "+ref.src.server+", resource "+ref.uri, res.InputRequests, upstreamRecord{Binding: bind, State: res.RequestState}, nil)
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{InputRequests: reqs, RequestState: sealed}, nil
	}
	out := *res
	out.Contents = make([]*mcp.ResourceContents, 0, len(res.Contents))
	for _, c := range res.Contents {
		cc := *c
		if cc.URI == ref.uri {
			cc.URI = uri
		}
		out.Contents = append(out.Contents, &cc)
	}
	out.CacheScope = "private"
	return &out, nil
}

func quoteBounded(s string) string { return "\"" + bounded(s, 256) + "\"" }

// templateRef is one upstream resource template and where it came from.
type templateRef struct {
	src  source
	tmpl *uritemplate.Template
}

// listTemplates answers resources/templates/list with the upstreams'
// templates (a template two servers share is given once, from the first).
func (g *Gateway) listTemplates(ctx context.Context, st *state, req *mcp.ListResourceTemplatesRequest) (*mcp.ListResourceTemplatesResult, error) {
	_, tok, ok := bearer.From(req.GetExtra().TokenInfo)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "no verified bearer token"}
	}
	out, err := g.upstreamTemplates(ctx, st, tok)
	if err != nil {
		return nil, unavailableList(err)
	}
	return &mcp.ListResourceTemplatesResult{ResourceTemplates: out, Cacheable: mcp.Cacheable{CacheScope: "private"}}, nil
}

func (g *Gateway) upstreamTemplates(ctx context.Context, st *state, tok string) ([]*mcp.ResourceTemplate, error) {
	srcs, err := g.sources(ctx, st, tok)
	if err != nil {
		return nil, err
	}
	var refs []templateRef
	out := []*mcp.ResourceTemplate{}
	seen := map[string]bool{}
	for _, s := range srcs {
		cs, err := g.session(ctx, s)
		if err != nil {
			continue
		}
		if ir := cs.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Resources == nil {
			continue
		}
		cursor := ""
		for range maxPassPages {
			res, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				break
			}
			for _, rt := range res.ResourceTemplates {
				if seen[rt.URITemplate] || len(out) >= maxPassItems {
					continue
				}
				tmpl, err := uritemplate.New(rt.URITemplate)
				if err != nil {
					continue
				}
				seen[rt.URITemplate] = true
				refs = append(refs, templateRef{s, tmpl})
				out = append(out, rt)
			}
			if res.NextCursor == "" {
				break
			}
			cursor = res.NextCursor
		}
	}
	st.mu.Lock()
	st.templates = refs
	st.mu.Unlock()
	return out, nil
}

// templateSource is the server whose listed template matches uri.
func (st *state) templateSource(uri string) (source, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, t := range st.templates {
		if t.tmpl.Match(uri) != nil {
			return t.src, true
		}
	}
	return source{}, false
}

// complete answers completion/complete through the server of the prompt
// (by its listed name) or of the resource template the reference names.
func (g *Gateway) complete(ctx context.Context, st *state, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	empty := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}
	if req.Params == nil || req.Params.Ref == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing ref"}
	}
	_, tok, ok := bearer.From(req.GetExtra().TokenInfo)
	if !ok {
		return empty, nil
	}
	params := *req.Params
	ref := *req.Params.Ref
	var src source
	switch ref.Type {
	case "ref/prompt":
		st.mu.Lock()
		pr, found := st.prompts[ref.Name]
		st.mu.Unlock()
		if !found {
			if _, err := g.listPrompts(ctx, st, &mcp.ListPromptsRequest{Session: req.Session, Extra: req.Extra}); err != nil {
				return nil, err
			}
			st.mu.Lock()
			pr, found = st.prompts[ref.Name]
			st.mu.Unlock()
		}
		if !found {
			return empty, nil
		}
		src, ref.Name = pr.src, pr.name
	case "ref/resource":
		s, found := st.templateSource(ref.URI)
		if !found {
			if _, err := g.upstreamTemplates(ctx, st, tok); err != nil {
				return nil, unavailableList(err)
			}
			if s, found = st.templateSource(ref.URI); !found {
				return empty, nil
			}
		}
		src = s
	default:
		return empty, nil
	}
	cs, err := g.session(ctx, src)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the reference's server did not answer"}
	}
	if ir := cs.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Completions == nil {
		return empty, nil
	}
	params.Ref = &ref
	return cs.Complete(ctx, &params)
}
