package mcpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
)

// confirmInput is the id of the confirmation in an input-required result.
const confirmInput = "confirm"

// maxArgsShown bounds the arguments quoted in a confirmation message.
const maxArgsShown = 2048

// binding is what one confirmation request is for: the principal, the tool
// at its generation and digest, and the exact arguments. A confirmation
// answers only the call it was asked for.
func binding(st *state, rt *admissionv1.RuntimeTool, argDigest string) string {
	return strings.Join([]string{st.key, rt.GetToolId(), fmt.Sprint(rt.GetGeneration()), rt.GetDescriptorDigest(), argDigest}, "\x00")
}

func (g *Gateway) confirmKey(nonce string) string {
	return g.opts.Redis.Key("gateway", "confirm", nonce)
}

// askConfirmation answers a call that needs the user's confirmation with an
// input-required result: an elicitation showing the tool, its effect class
// and the arguments, and a request state naming a single-use record (in
// Redis, so any replica can take the retry) bound to this exact call.
//
// The record also keeps the digest of what the user is shown (see
// [shownDigest]): the gateway states it when it asserts the confirmation,
// and admission records it in the receipt.
func (g *Gateway) askConfirmation(ctx context.Context, st *state, shown *shownTool, args []byte, argDigest string) (*mcp.CallToolResult, error) {
	ask := confirmationAsk(shown, args)
	digest, err := shownDigest(ask, argDigest)
	if err != nil {
		return nil, err
	}
	nonce := rand.Text()
	if err := g.opts.Redis.Set(ctx, g.confirmKey(nonce), digest+"\x00"+binding(st, shown.rt, argDigest), g.opts.ConfirmTTL).Err(); err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{confirmInput: ask},
		RequestState:  nonce,
	}, nil
}

// confirmationAsk is the elicitation that asks the user to confirm one
// call: the tool's name, id and effect class, and the arguments (cut at
// [maxArgsShown] bytes), with one boolean to accept.
func confirmationAsk(shown *shownTool, args []byte) *mcp.ElicitParams {
	rt := shown.rt
	msg := fmt.Sprintf("Allow the tool %s (%s, effect %s) to run with these arguments?\n%s",
		shown.model.Name, rt.GetToolId(), effectName(rt.GetEffectClass()), bounded(string(args), maxArgsShown))
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: msg,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"confirm": map[string]any{"type": "boolean", "title": "Run " + shown.model.Name, "description": "Run this call once, with exactly these arguments."},
			},
			"required": []string{"confirm"},
		},
	}
}

// elicitConfirmation asks the client of ss (a session whose client
// declared elicitation) to confirm the call by elicitation/create, within
// the call's request. It returns the digest of what the user was shown
// when the user accepted with confirm = true; else the reason
// (USER_DECLINED for decline, cancel or confirm = false; UNAVAILABLE when
// the client did not answer) and a detail.
func (g *Gateway) elicitConfirmation(ctx context.Context, ss *mcp.ServerSession, shown *shownTool, args []byte, argDigest string) (digest, why, detail string) {
	ask := confirmationAsk(shown, args)
	digest, err := shownDigest(ask, argDigest)
	if err != nil {
		return "", ReasonUnavailable, "the confirmation could not be prepared; nothing was run"
	}
	ectx, cancel := context.WithTimeout(ctx, g.confirmWait())
	defer cancel()
	res, err := ss.Elicit(ectx, ask)
	if err != nil {
		return "", ReasonUnavailable, fmt.Sprintf("the client did not answer the confirmation (%s); nothing was run", grpcCode(err))
	}
	if res.Action != "accept" || !accepted(res.Content["confirm"]) {
		return "", ReasonUserDeclined, "the user did not confirm the call"
	}
	return digest, "", ""
}

// confirmWait is how long the gateway waits for the user's answer to a
// confirmation asked over a session: the confirmation TTL (the time a
// 2026-07-28 client has to answer one).
func (g *Gateway) confirmWait() time.Duration {
	if g.opts.ConfirmTTL > 0 {
		return g.opts.ConfirmTTL
	}
	return 5 * time.Minute
}

// shownDigest is the digest of what a confirmation shows the user: the
// canonical JSON (RFC 8785) of the elicitation (its message names the
// tool, its id and effect class and quotes the arguments, cut at
// [maxArgsShown] bytes; its form) and the digest of the whole arguments,
// which the message may have cut.
func shownDigest(ask *mcp.ElicitParams, argDigest string) (string, error) {
	return canonical.DigestValue(map[string]any{"elicitation": ask, "argument_digest": argDigest})
}

// confirmed checks a retried call's confirmation: the request state must
// name a live record made for this call (it is consumed), and the user
// must have accepted with confirm = true. It returns "" and the digest of
// what the user was shown when confirmed, else the reason and a detail.
func (g *Gateway) confirmed(ctx context.Context, st *state, rt *admissionv1.RuntimeTool, argDigest string, p *mcp.CallToolParamsRaw) (why, detail, shown string) {
	if len(p.RequestState) > 64 {
		return reasonConfirmation, "the confirmation state is not one this gateway issued", ""
	}
	// The record is consumed, and with replicas (Sentinel) the consumption
	// counts only once a replica holds it: a failover must not bring the
	// record back for a second use.
	var get *redis.StringCmd
	perr := g.opts.Redis.AckPipelined(ctx, func(pipe redis.Pipeliner) { get = pipe.GetDel(ctx, g.confirmKey(p.RequestState)) })
	rec, err := get.Result()
	if errors.Is(err, redis.Nil) {
		return reasonConfirmation, "the confirmation expired, was already used, or was never asked for", ""
	}
	if err != nil || perr != nil {
		return ReasonUnavailable, "the confirmation could not be checked (redis did not answer, or no replica recorded its use); nothing was run", ""
	}
	shown, want, _ := strings.Cut(rec, "\x00")
	if want != binding(st, rt, argDigest) || !canonical.ValidDigest(shown) {
		return reasonConfirmation, "the confirmation was given for another call (tool or arguments differ)", ""
	}
	resp, ok := p.InputResponses[confirmInput].(*mcp.ElicitResult)
	if !ok {
		return reasonConfirmation, "the retried call carries no answer to the confirmation", ""
	}
	if resp.Action != "accept" || !accepted(resp.Content["confirm"]) {
		return ReasonUserDeclined, "the user did not confirm the call", ""
	}
	return "", "", shown
}

const reasonConfirmation = "CONFIRMATION_REQUIRED"

func accepted(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case json.RawMessage:
		return string(b) == "true"
	}
	return false
}
