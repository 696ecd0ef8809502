package mcpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"
)

// An upstream's input-required result (MCP 2026-07-28, SEP-2322) passes
// through to the client: its input requests as the upstream sent them,
// and in place of the upstream's request state a state of the gateway's
// own ([upstreamStatePrefix] and a nonce) naming a single-use record in
// Redis (any replica takes the retry). The record binds the call it was
// made for (principal and run, tool at its generation and descriptor
// digest, argument digest; or the prompt or resource read) and keeps the
// upstream's state, which goes back upstream only with a retry of exactly
// that call. A client can neither alter the upstream's state (it never
// sees it), nor replay it (the record is consumed), nor move it to
// another tool, arguments or principal (the binding); the upstream still
// checks its own state. A tools/call retry is a new call for the
// gateway: Check and a new lease, like any call.

// upstreamStatePrefix starts a request state that wraps an upstream's.
// The gateway's own confirmation states are bare nonces ([askConfirmation]).
const upstreamStatePrefix = "tcu."

// Reasons (metric labels) of an input-required round.
const (
	// reasonStateInvalid: the client's request state is not one the
	// gateway issued for this call; nothing ran.
	reasonStateInvalid = "REQUEST_STATE_INVALID"
	// reasonUpstreamError: the upstream's JSON-RPC error went to the
	// client as is ([passedError]).
	reasonUpstreamError = "UPSTREAM_ERROR"
	// reasonInputRequired: the upstream asked the client for input.
	reasonInputRequired = "INPUT_REQUIRED"
)

// maxUpstreamState bounds the upstream request state the gateway keeps.
const maxUpstreamState = 64 << 10

// upstreamRecord is what an upstream state's record keeps.
type upstreamRecord struct {
	// Binding is the call the state was issued for.
	Binding string `json:"b"`
	// State is the upstream's request state ("" when it sent none).
	State string `json:"s,omitempty"`
	// Shown is the digest of the confirmation the user gave this call
	// before its first round ("" without one): the retry is the same
	// call, re-checked as USER_CONFIRMED with the same digest.
	Shown string `json:"c,omitempty"`
}

// errStateInvalid is the JSON-RPC error for a request state the gateway
// cannot honour: not one it issued, expired, already used, or issued for
// another call. No detail of the state is echoed.
func errStateInvalid(why string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState: " + why}
}

// errStateUnavailable: Redis did not answer; nothing was run.
var errStateUnavailable = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the request state could not be checked (the gateway's store did not answer); nothing was run"}

func (g *Gateway) upstreamStateKey(nonce string) string {
	return g.opts.Redis.Key("gateway", "upstream-state", nonce)
}

// sealUpstreamState keeps the upstream's request state (with the call's
// binding and carried confirmation) and returns the state the client gets.
func (g *Gateway) sealUpstreamState(ctx context.Context, rec upstreamRecord) (string, error) {
	if len(rec.State) > maxUpstreamState {
		return "", errors.New("the upstream's request state is larger than the gateway keeps")
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	nonce := rand.Text()
	if err := g.opts.Redis.Set(ctx, g.upstreamStateKey(nonce), b, g.confirmWait()).Err(); err != nil {
		return "", err
	}
	return upstreamStatePrefix + nonce, nil
}

// openUpstreamState consumes the record a client's request state names
// and returns it when it was issued for binding; else a JSON-RPC error
// (invalid params, or internal when Redis did not answer).
func (g *Gateway) openUpstreamState(ctx context.Context, state, binding string) (upstreamRecord, error) {
	nonce, ok := strings.CutPrefix(state, upstreamStatePrefix)
	if !ok || len(nonce) == 0 || len(nonce) > 64 {
		return upstreamRecord{}, errStateInvalid("not a state this gateway issued")
	}
	// Consumed, and counted only once a replica holds the consumption
	// (as a confirmation is: [Gateway.confirmed]).
	var get *redis.StringCmd
	perr := g.opts.Redis.AckPipelined(ctx, func(pipe redis.Pipeliner) { get = pipe.GetDel(ctx, g.upstreamStateKey(nonce)) })
	raw, err := get.Bytes()
	if errors.Is(err, redis.Nil) {
		return upstreamRecord{}, errStateInvalid("not a state this gateway issued, expired, or already used")
	}
	if err != nil || perr != nil {
		return upstreamRecord{}, errStateUnavailable
	}
	var rec upstreamRecord
	if err := json.Unmarshal(raw, &rec); err != nil || rec.Binding != binding {
		return upstreamRecord{}, errStateInvalid("issued for another request (tool, arguments or caller differ)")
	}
	return rec, nil
}

// isUpstreamState reports whether a client's request state is one that
// wraps an upstream's (else it is one of the gateway's confirmations).
func isUpstreamState(s string) bool { return strings.HasPrefix(s, upstreamStatePrefix) }

// passedError is an upstream's JSON-RPC error the client gets as is (its
// message bounded, its data dropped when large): -32021 (the upstream
// needs a client capability the client did not declare) always, and
// invalid params when the call carried input responses or a request state
// (the upstream refusing the client's answers). Others are nil: the
// gateway answers them as an UNAVAILABLE tool result.
func passedError(err error, answering bool) *jsonrpc.Error {
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) {
		return nil
	}
	if jerr.Code != mcp.CodeMissingRequiredClientCapabilities && (jerr.Code != jsonrpc.CodeInvalidParams || !answering) {
		return nil
	}
	out := &jsonrpc.Error{Code: jerr.Code, Message: bounded(jerr.Message, 512)}
	if len(jerr.Data) <= 4096 && json.Valid(jerr.Data) {
		out.Data = jerr.Data
	}
	return out
}

// forwardedCapabilities is the `_meta` client-capabilities object the
// gateway sends upstream for a stateless call: the capabilities the
// calling client declared that an upstream's input request may use
// through the gateway (elicitation, roots; sampling only when sampling is
// true: the called tool's contract, approved at the called digest, allows
// it), nothing else. A capability the client did not declare is never
// claimed to the upstream.
func forwardedCapabilities(caps *mcp.ClientCapabilities, sampling bool) map[string]any {
	out := map[string]any{}
	if caps == nil {
		return out
	}
	if caps.Elicitation != nil {
		out["elicitation"] = caps.Elicitation
	}
	if caps.RootsV2 != nil {
		out["roots"] = caps.RootsV2
	} else if caps.Roots.ListChanged {
		out["roots"] = map[string]any{"listChanged": true}
	}
	if sampling && caps.Sampling != nil {
		out["sampling"] = caps.Sampling
	}
	return out
}

// samplingGrant lets an upstream's input requests ask the client for a
// sampling: given only for a tools/call whose tool's approved contract
// allows sampling ([directory.Review.AllowsSampling]), with what the
// client declared.
type samplingGrant struct {
	// declared is the client's sampling capability (nil: none declared).
	declared *mcp.SamplingCapabilities
	// server and tool name the request's origin ([MetaRelayedFrom]).
	server, tool string
	// maxTokens bounds the request's maxTokens (--sampling-max-tokens;
	// 0: no bound).
	maxTokens int64
}

// passSampling is an upstream's sampling input request as the client gets
// it, the way the session relay passes one ([relay.sample]): refused
// without a grant, without the client's sampling capability, or offering
// tools to a client that did not declare sampling with tools; else with
// includeContext dropped and `_meta` naming the server and tool. A
// request whose maxTokens is over the grant's bound is refused too.
func passSampling(grant *samplingGrant, ir mcp.InputRequest) (mcp.InputRequest, error) {
	if grant == nil || grant.declared == nil {
		return nil, errSamplingRefused
	}
	over := func(n int64) bool { return grant.maxTokens > 0 && n > grant.maxTokens }
	from := map[string]string{"server": grant.server, "tool": grant.tool}
	strip := func(m mcp.Meta) mcp.Meta {
		out := mcp.Meta{}
		for k, v := range m {
			if k != "progressToken" && k != MetaRelayedFrom {
				out[k] = v
			}
		}
		out[MetaRelayedFrom] = from
		return out
	}
	switch p := ir.(type) {
	case *mcp.CreateMessageParams:
		if over(p.MaxTokens) {
			return nil, errSamplingRefused
		}
		c := *p
		c.IncludeContext, c.Meta = "", strip(p.Meta)
		return &c, nil
	case *mcp.CreateMessageWithToolsParams:
		if (len(p.Tools) > 0 || p.ToolChoice != nil) && grant.declared.Tools == nil || over(p.MaxTokens) {
			return nil, errSamplingRefused
		}
		c := *p
		c.IncludeContext, c.Meta = "", strip(p.Meta)
		return &c, nil
	}
	return nil, errSamplingRefused
}

// errSamplingRefused: an upstream's input requests include a sampling the
// gateway does not pass: the tool's reviewed contract does not allow it,
// the client did not declare it (with tools, when tools are offered), or
// its maxTokens is over --sampling-max-tokens.
var errSamplingRefused = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "the server asked the client for sampling (sampling/createMessage), which is not allowed through the gateway for this request"}

// ReasonSamplingRefused: the tool's server asked the client for sampling
// in an input-required result, which the gateway does not pass
// ([errSamplingRefused]).
const ReasonSamplingRefused = "SAMPLING_NOT_ALLOWED"

// maxInputMessage bounds an upstream elicitation's message shown to the
// client.
const maxInputMessage = 4096

// inputPassThrough is the answer to a client whose request an upstream
// answered with input requests: the requests with each elicitation's
// message shown as from origin (the server and the tool, prompt or
// resource: "server X, tool Y"), and the gateway's state in place of the
// upstream's. A client that cannot answer input requests (before
// 2026-07-28, whose session's calls the upstream asks by server-to-client
// requests instead) never gets one, and a request for sampling passes only
// with a grant ([passSampling]; nil for prompts and resources, which have
// no contract), else the whole answer is refused ([errSamplingRefused]).
func (g *Gateway) inputPassThrough(ctx context.Context, ss *mcp.ServerSession, origin string, reqs mcp.InputRequestMap, rec upstreamRecord, sampling *samplingGrant) (mcp.InputRequestMap, string, error) {
	return g.passInputs(ctx, supportsInputRequests(ss), origin, reqs, rec, sampling)
}

// passInputs is [Gateway.inputPassThrough] for a client that can (canTake)
// or cannot take input requests.
func (g *Gateway) passInputs(ctx context.Context, canTake bool, origin string, reqs mcp.InputRequestMap, rec upstreamRecord, sampling *samplingGrant) (mcp.InputRequestMap, string, error) {
	if !canTake {
		return nil, "", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server asked for input this client cannot be asked for (input requests need MCP 2026-07-28 or later)"}
	}
	out := make(mcp.InputRequestMap, len(reqs))
	for id, ir := range reqs {
		switch p := ir.(type) {
		case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
			passed, err := passSampling(sampling, ir)
			if err != nil {
				return nil, "", err
			}
			out[id] = passed
		case *mcp.ElicitParams:
			c := *p
			c.Message = "[" + bounded(origin, 512) + "] " + bounded(p.Message, maxInputMessage)
			out[id] = &c
		default:
			out[id] = ir
		}
	}
	sealed, err := g.sealUpstreamState(ctx, rec)
	if err != nil {
		return nil, "", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server's request for input could not be kept; nothing more was run"}
	}
	return out, sealed, nil
}
