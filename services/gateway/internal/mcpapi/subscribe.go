package mcpapi

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/services/gateway/internal/bearer"
)

// errSubscribeNeedsSession answers resources/subscribe on the stateless
// endpoint: updates can reach only a client with a session.
var errSubscribeNeedsSession = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
	Message: "resources/subscribe needs a session: initialize at 2025-06-18 or 2025-11-25 (Mcp-Session-Id)"}

// subscribe answers resources/subscribe (on = true) and
// resources/unsubscribe for an upstream resource the principal was
// listed: it is passed to the resource's server over the session's own
// upstream session, and the server's notifications/resources/updated for
// it reach this session under the URI as listed ([relay.Handle]).
func (g *Gateway) subscribe(ctx context.Context, st *state, ss *mcp.ServerSession, extra *mcp.RequestExtra, uri string, on bool) error {
	rl := g.relayOf(st, ss)
	if rl == nil {
		return errSubscribeNeedsSession
	}
	st.mu.Lock()
	ref, ok := st.resources[uri]
	st.mu.Unlock()
	if !ok && on {
		_, tok, okTok := bearer.From(extra.TokenInfo)
		if !okTok {
			return mcp.ResourceNotFoundError(quoteBounded(uri))
		}
		if _, err := g.upstreamResources(ctx, st, tok); err != nil {
			return unavailableList(err)
		}
		st.mu.Lock()
		ref, ok = st.resources[uri]
		st.mu.Unlock()
	}
	if !ok {
		return mcp.ResourceNotFoundError(quoteBounded(uri))
	}
	ep, err := g.opts.Directory.Endpoint(ctx, ref.src.server, ref.src.class)
	if err != nil {
		return unavailableList(err)
	}
	target := ep.Target()
	cs, err := g.opts.Upstream.SessionFor(ctx, target, rl)
	if err != nil {
		return unavailableList(err)
	}
	if on {
		rl.watch(target.Identity(), ref.uri, uri)
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: ref.uri}); err != nil {
			rl.unwatch(target.Identity(), ref.uri)
			return relayErr(err)
		}
		return nil
	}
	rl.unwatch(target.Identity(), ref.uri)
	return relayErr(cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: ref.uri}))
}
