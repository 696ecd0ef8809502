package mcpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/gateway/internal/bearer"
	"github.com/toolcrib/toolcrib/services/gateway/internal/directory"
	"github.com/toolcrib/toolcrib/services/gateway/internal/policy"
	"github.com/toolcrib/toolcrib/services/gateway/internal/sessionpool"
)

// `_meta` keys of a call's answer.
const (
	// MetaReason is the reason of a denied or refused call.
	MetaReason = "dev.toolcrib/reason"
	// MetaReceipt is the admission receipt id the call ran (or was denied)
	// under.
	MetaReceipt = "dev.toolcrib/receipt"
	// MetaExecutionReceipt is the lease service's execution receipt id.
	MetaExecutionReceipt = "dev.toolcrib/execution-receipt"
	// MetaDropped lists the fields the projection removed.
	MetaDropped = "dev.toolcrib/dropped-fields"
)

// Reasons of the gateway's own (beyond admission's decision reasons and
// the result policy's).
const (
	// ReasonUnavailable: admission, the lease service, the registry,
	// discovery or the upstream did not answer; nothing ran.
	ReasonUnavailable = "UNAVAILABLE"
	// ReasonLeaseRefused: the lease service refused to issue a lease.
	ReasonLeaseRefused = "LEASE_REFUSED"
	// ReasonUpstreamDeadline: the upstream did not answer within the
	// contract's deadline.
	ReasonUpstreamDeadline = "UPSTREAM_DEADLINE"
	// ReasonUpstreamIdentity: a stdio server's registered command is not
	// the identity discovery pinned; the gateway does not start it.
	ReasonUpstreamIdentity = "UPSTREAM_IDENTITY_MISMATCH"
	// ReasonUserDeclined: the user declined (or cancelled) the
	// confirmation.
	ReasonUserDeclined = "USER_DECLINED"
	// ReasonConfirmationUnanswerable: the call needs the user's
	// confirmation and the client cannot be asked (a protocol version
	// before 2026-07-28 on this stateless endpoint).
	ReasonConfirmationUnanswerable = "CONFIRMATION_UNANSWERABLE"
	// ReasonResultTooLarge: the result exceeds even the artifact limit.
	ReasonResultTooLarge = "RESULT_TOO_LARGE"
	// ReasonNotVisible: no tool of that name was shown to the principal.
	ReasonNotVisible = "NOT_FOUND"
)

// Outcome labels of the call metric.
const (
	outcomeOK          = "ok"
	outcomeDenied      = "denied"
	outcomeRefused     = "refused"
	outcomeUnavailable = "unavailable"
	outcomeConfirm     = "confirm"
	outcomeInput       = "input_required" // the upstream asked the client for input
)

// whatToDo is the advice given with each admission reason.
var whatToDo = map[catalogv1.DecisionReason]string{
	catalogv1.DecisionReason_DECISION_REASON_INVALID_INPUT:         "send the call again with well-formed arguments",
	catalogv1.DecisionReason_DECISION_REASON_NOT_FOUND:             "list tools again (tools/list): this tool is not among the tools you may call",
	catalogv1.DecisionReason_DECISION_REASON_DISABLED:              "the tool's owner has disabled it; use another tool or ask the owner",
	catalogv1.DecisionReason_DECISION_REASON_UNREVIEWED:            "the tool's current definition awaits its owner's approval; try again later",
	catalogv1.DecisionReason_DECISION_REASON_STALE_SCHEMA:          "the tool's definition changed: list tools again (tools/list) and plan with the new one",
	catalogv1.DecisionReason_DECISION_REASON_STALE_CATALOG:         "the catalog moved on: list tools again (tools/list) and plan with the current tools",
	catalogv1.DecisionReason_DECISION_REASON_INCOMPLETE_DISCOVERY:  "the server's catalog could not be proven; try again later",
	catalogv1.DecisionReason_DECISION_REASON_UNVERSIONED_SOURCE:    "the server gives no catalog revision, so calls with side effects are not allowed autonomously",
	catalogv1.DecisionReason_DECISION_REASON_STALE_POLICY:          "toolcrib cannot confirm your current permissions right now; retry in a few seconds",
	catalogv1.DecisionReason_DECISION_REASON_POLICY_REVOKED:        "your permission for this tool was revoked since you listed it: list tools again (tools/list); ask your tenant's admin if you still need it",
	catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN:             "you are not granted this tool; ask your tenant's admin",
	catalogv1.DecisionReason_DECISION_REASON_ARGUMENTS_INVALID:     "fix the arguments to match the tool's input schema",
	catalogv1.DecisionReason_DECISION_REASON_CONFIRMATION_REQUIRED: "the user must confirm this call",
	catalogv1.DecisionReason_DECISION_REASON_SERVER_CLOSED:         "the server is closed: no current catalog proves authorization; try again later",
	// Decided before a confirmation is asked for, so the user is never
	// asked to confirm a call a condition refuses.
	catalogv1.DecisionReason_DECISION_REASON_CONDITION_UNMET: "a condition on your grant does not allow this call (its arguments, run or time); change the call or ask your tenant's admin",
}

// reasonName is an admission reason without its enum prefix.
func reasonName(r catalogv1.DecisionReason) string {
	return strings.TrimPrefix(r.String(), "DECISION_REASON_")
}

// call runs the pipeline for one tools/call. canAsk is false for a tool
// the principal was shown but that is no longer visible: its answer is a
// denial or a plain result, never a confirmation request. Every failure
// is a tool result with isError, except the JSON-RPC errors of an
// input-required round ([round]).
func (g *Gateway) call(ctx context.Context, st *state, req *mcp.CallToolRequest, canAsk bool) (*mcp.CallToolResult, error) {
	growStack()
	start := time.Now()
	var rd round
	res, outcome, reason := g.run(ctx, st, req, canAsk, &rd)
	g.opts.Metrics.Call(outcome, reason, time.Since(start))
	if rd.err != nil {
		return nil, rd.err
	}
	if outcome != outcomeOK && outcome != outcomeConfirm && outcome != outcomeInput {
		p := st.p
		g.opts.Logger.InfoContext(ctx, "tool call not run", "tenant", p.Tenant, "subject", p.Subject,
			"tool", bounded(req.Params.Name, 128), "outcome", outcome, "reason", reason)
	}
	return res, nil
}

// round is what one tools/call carries of a multi-round call (MCP
// 2026-07-28): err is the JSON-RPC error its answer is instead of a
// result (a request state the gateway did not issue for this call; an
// upstream's error passed through, [passedError]).
type round struct{ err *jsonrpc.Error }

func (g *Gateway) run(ctx context.Context, st *state, req *mcp.CallToolRequest, canAsk bool, rd *round) (*mcp.CallToolResult, string, string) {
	_, tok, ok := bearer.From(req.GetExtra().TokenInfo)
	if !ok {
		return denial(ReasonUnavailable, "no verified bearer token reached the gateway", ""), outcomeUnavailable, ReasonUnavailable
	}
	name := req.Params.Name
	shown := st.shownTool(name)
	if shown == nil {
		// Another replica may have listed it: read the set once.
		if _, err := g.sync(ctx, st, tok); err != nil {
			return unavailable("admission", err), outcomeUnavailable, ReasonUnavailable
		}
		if shown = st.shownTool(name); shown == nil {
			return denial(ReasonNotVisible, fmt.Sprintf("no tool named %q is visible to you", bounded(name, 128)),
				"list tools again (tools/list) and call one of those"), outcomeDenied, ReasonNotVisible
		}
	}
	rt := shown.rt
	args := []byte(req.Params.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	argDigest, err := lease.ArgumentDigest(args)
	if err != nil {
		r := catalogv1.DecisionReason_DECISION_REASON_ARGUMENTS_INVALID
		return denial(reasonName(r), "the arguments are not valid JSON", whatToDo[r]), outcomeDenied, reasonName(r)
	}

	mode := admissionv1.Mode_MODE_AUTONOMOUS
	callOpts := []grpc.CallOption{withToken(tok)}
	var shownDigest string
	// What goes upstream of the client's answers: its input responses and
	// the upstream's own state, unwrapped from the gateway's.
	var upResponses mcp.InputResponseMap
	var upState string
	if rs := req.Params.RequestState; isUpstreamState(rs) {
		rec, err := g.openUpstreamState(ctx, rs, binding(st, rt, argDigest))
		if err != nil {
			rd.err = err.(*jsonrpc.Error)
			return nil, outcomeRefused, reasonStateInvalid
		}
		upResponses, upState, shownDigest = req.Params.InputResponses, rec.State, rec.Shown
		if shownDigest != "" {
			// Confirmed before its first round: the same call, re-checked
			// as confirmed with what the user was shown.
			mode = admissionv1.Mode_MODE_USER_CONFIRMED
			if g.opts.Confirmer != nil {
				callOpts = []grpc.CallOption{grpc.PerRPCCredentials(principal.Beside(principal.BearerToken(tok), g.opts.Confirmer))}
			}
		}
	} else if rs == "" {
		// A first round: input responses the client sent unasked are the
		// upstream's to judge.
		upResponses = req.Params.InputResponses
	} else {
		why, detail, digest := g.confirmed(ctx, st, rt, argDigest, req.Params)
		if why != "" {
			return denial(why, detail, "call the tool again to be asked anew"), outcomeDenied, why
		}
		// The user's token stays the principal; the gateway asserts the
		// confirmation with its own confirmer token beside it.
		mode, shownDigest = admissionv1.Mode_MODE_USER_CONFIRMED, digest
		if g.opts.Confirmer != nil { // else admission denies it FORBIDDEN
			callOpts = []grpc.CallOption{grpc.PerRPCCredentials(principal.Beside(principal.BearerToken(tok), g.opts.Confirmer))}
		}
	}
	chk, err := g.opts.Admission.Check(ctx, &admissionv1.CheckRequest{
		ToolId: rt.GetToolId(), Generation: rt.GetGeneration(), DescriptorDigest: rt.GetDescriptorDigest(),
		PolicyEpoch: shown.epoch, Arguments: args, Mode: mode, AudienceClass: rt.GetAudienceClass(), RunId: st.runID,
		ShownDigest: shownDigest,
	}, callOpts...)
	if err != nil {
		return unavailable("admission", err), outcomeUnavailable, ReasonUnavailable
	}
	if chk.GetDecision() != admissionv1.Decision_DECISION_ALLOW && confirmable(chk.GetReason()) && mode == admissionv1.Mode_MODE_AUTONOMOUS && canAsk {
		r := chk.GetReason()
		elicit := canElicit(req.Session)
		if !elicit && !supportsInputRequests(req.Session) {
			return denial(ReasonConfirmationUnanswerable, "this call needs the user's confirmation, and the client cannot be asked: it declared no elicitation capability on a session",
				"connect with a client that handles elicitation (MCP 2025-06-18 or 2025-11-25 with a session), or with MCP 2026-07-28 or later, whose input-required results carry the confirmation"), outcomeDenied, ReasonConfirmationUnanswerable
		}
		if g.opts.Confirmer == nil {
			// Asking would be for nothing: admission honours a
			// confirmation only from a confirmer.
			return denial(ReasonConfirmationUnanswerable, "this call needs the user's confirmation, and this gateway has no confirmer token to assert one",
				"ask the operator to configure the gateway's --confirmer-token-file"), outcomeDenied, ReasonConfirmationUnanswerable
		}
		if !elicit {
			res, err := g.askConfirmation(ctx, st, shown, args, argDigest)
			if err != nil {
				return unavailable("redis", err), outcomeUnavailable, ReasonUnavailable
			}
			return res, outcomeConfirm, reasonName(r)
		}
		// A client with a session is asked now, by elicitation/create over
		// its session, and the call goes on in this request.
		digest, why, detail := g.elicitConfirmation(ctx, req.Session, shown, args, argDigest)
		if why != "" {
			return denial(why, detail, "call the tool again to be asked anew"), outcomeDenied, why
		}
		mode, shownDigest = admissionv1.Mode_MODE_USER_CONFIRMED, digest
		chk, err = g.opts.Admission.Check(ctx, &admissionv1.CheckRequest{
			ToolId: rt.GetToolId(), Generation: rt.GetGeneration(), DescriptorDigest: rt.GetDescriptorDigest(),
			PolicyEpoch: shown.epoch, Arguments: args, Mode: mode, AudienceClass: rt.GetAudienceClass(), RunId: st.runID,
			ShownDigest: shownDigest,
		}, grpc.PerRPCCredentials(principal.Beside(principal.BearerToken(tok), g.opts.Confirmer)))
		if err != nil {
			return unavailable("admission", err), outcomeUnavailable, ReasonUnavailable
		}
	}
	if chk.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
		r := chk.GetReason()
		res := denial(reasonName(r), bounded(chk.GetDetail(), 512), whatToDo[r])
		res.Meta[MetaReceipt] = chk.GetReceipt().GetReceiptId()
		return res, outcomeDenied, reasonName(r)
	}
	receipt := chk.GetReceipt()

	review, err := g.opts.Directory.Review(ctx, rt.GetToolId(), rt.GetAudienceClass(), rt.GetDescriptorDigest(), receipt.GetPolicyEpoch())
	if err != nil {
		return unavailable("registry", err), outcomeUnavailable, ReasonUnavailable
	}
	desc, err := g.opts.Directory.Descriptor(ctx, rt.GetServerId(), rt.GetAudienceClass(), receipt.GetGeneration(), rt.GetDescriptorDigest())
	if err != nil {
		return unavailable("discovery", err), outcomeUnavailable, ReasonUnavailable
	}
	if desc.OutputErr != nil {
		return denial(policy.ReasonOutputInvalid, "the tool's output schema cannot be compiled, so its result cannot be checked", ""), outcomeRefused, policy.ReasonOutputInvalid
	}
	ep, err := g.opts.Directory.Endpoint(ctx, rt.GetServerId(), rt.GetAudienceClass())
	if errors.Is(err, directory.ErrIdentity) {
		return identityDenial(), outcomeDenied, ReasonUpstreamIdentity
	}
	if err != nil {
		return unavailable("registry", err), outcomeUnavailable, ReasonUnavailable
	}

	audience := g.opts.LeaseAudiencePrefix + rt.GetServerId()
	ireq := &leasev1.IssueRequest{ArgumentDigest: argDigest, HolderPublicKey: g.holderJWK, Audience: audience}
	if signed := chk.GetSignedReceipt(); signed != "" {
		// Verified by the lease service locally: no GetReceipt round trip.
		ireq.SignedReceipt = signed
	} else {
		ireq.ReceiptId = receipt.GetReceiptId() // an admission that signs no receipts
	}
	iss, err := g.opts.Lease.Issue(ctx, ireq, withToken(tok))
	if err != nil {
		if transient(err) {
			return unavailable("lease", err), outcomeUnavailable, ReasonUnavailable
		}
		why := errorReason(err)
		return denial(ReasonLeaseRefused, "the lease service refused a lease: "+why, "try again; if it persists the server's issuance may be frozen"), outcomeDenied, ReasonLeaseRefused
	}
	if g.proofs == nil {
		return unavailable("holder key", errors.New("the holder key is not an Ed25519 key")), outcomeUnavailable, ReasonUnavailable
	}
	proof, err := g.proofs.NewProof(lease.Claims{ID: iss.GetClaims().GetLeaseId(), ArgumentDigest: argDigest, Audience: audience}, time.Now())
	if err != nil {
		return unavailable("holder key", err), outcomeUnavailable, ReasonUnavailable
	}

	deadline := g.opts.DefaultDeadline
	if ms := review.Contract.GetDeadlineMs(); ms > 0 {
		deadline = time.Duration(ms) * time.Millisecond
	}
	uctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	params := &mcp.CallToolParams{Name: desc.Name, Arguments: json.RawMessage(args),
		Meta:           mcp.Meta{lease.MetaLease: iss.GetToken(), lease.MetaProof: proof},
		InputResponses: upResponses, RequestState: upState}
	if pt := req.Params.GetProgressToken(); pt != nil {
		// The upstream's progress reaches the caller under the caller's own
		// token; the upstream sees only a token of the gateway's.
		gt := "toolcrib-" + rand.Text()
		params.SetProgressToken(gt)
		g.progressMu.Lock()
		g.progress[gt] = progressSink{ss: req.Session, token: pt, ctx: ctx}
		g.progressMu.Unlock()
		defer func() {
			g.progressMu.Lock()
			delete(g.progress, gt)
			g.progressMu.Unlock()
		}()
	}
	target := ep.Target()
	var up *mcp.CallToolResult
	if rl := g.relayOf(st, req.Session); rl != nil {
		// A session's calls go over its own upstream session: what the
		// upstream sends back during the call reaches this client only.
		// A stateless (2026-07-28) upstream logs for a request only at the
		// level its _meta names: it sends every message, and the relay
		// passes on those at or above the level the client set
		// (logging/setLevel; none before it sets one).
		params.Meta[mcp.MetaKeyLogLevel] = "debug"
		cctx, end := rl.begin(ctx, uctx, target.Identity(), rt.GetServerId(), shown.model.Name, review.AllowsSampling())
		up, err = g.opts.Upstream.CallFor(cctx, target, params, rl)
		end()
	} else {
		// Stateless: the upstream learns the client's capabilities from the
		// request (those an input request can use).
		params.Meta[mcp.MetaKeyClientCapabilities] = forwardedCapabilities(req.ClientCapabilities(), review.AllowsSampling())
		sctx, done := drainAfter(uctx)
		sctx = statelessLogs(ctx, sctx, req, params, rt.GetServerId(), shown.model.Name)
		up, err = g.opts.Upstream.Call(sctx, target, params)
		done(err == nil)
	}
	if errors.Is(err, directory.ErrIdentity) {
		return identityDenial(), outcomeDenied, ReasonUpstreamIdentity
	}
	if jerr := passedError(err, upResponses != nil || upState != ""); jerr != nil {
		rd.err = jerr
		return nil, outcomeRefused, reasonUpstreamError
	}
	if err != nil {
		if errors.Is(uctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return denial(ReasonUpstreamDeadline, fmt.Sprintf("the tool did not answer within its deadline of %d ms", deadline.Milliseconds()), "try again later"), outcomeUnavailable, ReasonUpstreamDeadline
		}
		if errors.Is(err, sessionpool.ErrTooLarge) {
			return denial(ReasonResultTooLarge, fmt.Sprintf("the tool's answer is over the %d bytes the gateway reads from a tool (results of at most %d bytes); it was not read further",
				sessionpool.MessageBytesFor(g.opts.MaxArtifactBytes), g.opts.MaxArtifactBytes),
				"call the tool with arguments that select less"), outcomeRefused, ReasonResultTooLarge
		}
		return unavailable("the tool's server", err), outcomeUnavailable, ReasonUnavailable
	}
	if up.NeedsInput() {
		var sampling *samplingGrant
		if review.AllowsSampling() {
			var declared *mcp.SamplingCapabilities
			if c := req.ClientCapabilities(); c != nil {
				declared = c.Sampling
			}
			sampling = &samplingGrant{declared: declared, server: rt.GetServerId(), tool: shown.model.Name, maxTokens: g.opts.SamplingMaxTokens}
		}
		// The upstream asks the client for input: passed through, its state
		// kept by the gateway and bound to this call.
		reqs, sealed, err := g.inputPassThrough(ctx, req.Session, "server "+rt.GetServerId()+", tool "+shown.model.Name, up.InputRequests,
			upstreamRecord{Binding: binding(st, rt, argDigest), State: up.RequestState, Shown: shownDigest}, sampling)
		if errors.Is(err, errSamplingRefused) {
			return denial(ReasonSamplingRefused, "the tool asked for sampling (the client's model), which its reviewed contract or this client's capabilities do not allow through the gateway", ""), outcomeRefused, ReasonSamplingRefused
		}
		if err != nil {
			rd.err = err.(*jsonrpc.Error)
			return nil, outcomeUnavailable, ReasonUnavailable
		}
		return &mcp.CallToolResult{InputRequests: reqs, RequestState: sealed,
			Meta: mcp.Meta{MetaReceipt: receipt.GetReceiptId(), MetaExecutionReceipt: iss.GetExecutionReceiptId()}}, outcomeInput, reasonInputRequired
	}
	res, outcome, reason := g.applyPolicy(ctx, st, rt.GetToolId(), receipt.GetReceiptId(), review, desc, up)
	res.Meta[MetaReceipt] = receipt.GetReceiptId()
	res.Meta[MetaExecutionReceipt] = iss.GetExecutionReceiptId()
	return res, outcome, reason
}

// callStack is about the stack a call's pipeline needs below [Gateway.call]
// (the gRPC clients of Check and Issue, the upstream's MCP client, the
// result policy).
const callStack = 16 << 10

// growStack grows the calling goroutine's stack by callStack at once. The
// SDK runs each request in a new goroutine, whose small first stack the
// pipeline would otherwise outgrow several times, deep in gRPC and JSON
// code, each time copying every frame above it (runtime.copystack was a
// tenth of the gateway's CPU per call in bench-gateway's profile); grown
// here, the copy has only the SDK's frames to move.
//
//go:noinline
func growStack() {
	var pad [callStack]byte
	stackSink(pad[:])
}

// stackSink keeps pad, so the compiler neither drops nor shrinks the frame.
//
//go:noinline
func stackSink(pad []byte) { pad[len(pad)-1] = 0 }

// identityDenial is the answer for a stdio server that is not the identity
// discovery pinned (checked before the call, and again before its process
// is started).
func identityDenial() *mcp.CallToolResult {
	return denial(ReasonUpstreamIdentity, "the tool's stdio server is not the one its catalog was proven from: its registered command, "+
		"its executable, a script it runs or a file of its pinned directory changed", "ask the server's owner to review the change and have it pinned and scanned again")
}

// shownTool returns a copy of the tool last shown under name (its epoch
// moves under st.mu when the same set is listed at a newer epoch), or nil.
func (st *state) shownTool(name string) *shownTool {
	st.mu.Lock()
	defer st.mu.Unlock()
	t := st.shown[name]
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

// confirmable reports whether a denial for reason r is one a user's
// confirmation lifts: CONFIRMATION_REQUIRED, and UNVERSIONED_SOURCE (a
// side-effect tool of a server without catalog revisions may run when the
// user confirms the call, never autonomously: I3).
func confirmable(r catalogv1.DecisionReason) bool {
	return r == catalogv1.DecisionReason_DECISION_REASON_CONFIRMATION_REQUIRED || r == catalogv1.DecisionReason_DECISION_REASON_UNVERSIONED_SOURCE
}

// supportsInputRequests: the client negotiated 2026-07-28 or later, whose
// input-required result carries the confirmation request within the
// stateless call (an older client could only be asked by a server-to-client
// request, which a stateless endpoint cannot route back).
func supportsInputRequests(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	// A stateless request of the new protocol carries its version per
	// request and has no initialize parameters; old-protocol requests get
	// synthesized ones naming their version.
	ip := ss.InitializeParams()
	return ip == nil || ip.ProtocolVersion >= "2026-07-28"
}

func denial(reason, detail, todo string) *mcp.CallToolResult {
	text := "denied: " + reason
	if detail != "" {
		text += ": " + detail
	}
	if todo != "" {
		text += ". What to do: " + todo + "."
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}, Meta: mcp.Meta{MetaReason: reason}}
}

// unavailable is the answer when a dependency did not answer: an error
// result, never a pass. The text names the dependency and the gRPC code,
// not the error's text (it may carry internal detail).
func unavailable(what string, err error) *mcp.CallToolResult {
	return denial(ReasonUnavailable, fmt.Sprintf("%s did not answer (%s); nothing was run", what, grpcCode(err)), "retry shortly")
}

func grpcCode(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "deadline exceeded"
	}
	if errors.Is(err, context.Canceled) {
		return "cancelled"
	}
	if s, ok := status.FromError(err); ok {
		return s.Code().String()
	}
	return "transport error"
}

// transient reports whether a gRPC error means "no answer" rather than a
// refusal.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal, codes.ResourceExhausted:
		return true
	}
	return false
}

// errorReason is the ErrorInfo reason of a gRPC error, else its code.
func errorReason(err error) string {
	s, _ := status.FromError(err)
	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != "" {
			return info.GetReason()
		}
	}
	return s.Code().String()
}

// bounded cuts s to at most n bytes, dropping a rune cut in half.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// upstreamDrain is how long a stateless upstream call's HTTP exchange
// outlives its answer.
const upstreamDrain = 250 * time.Millisecond

// drainAfter returns the context of one stateless upstream call: it ends
// with ctx while the call is in flight (a client's cancel or the deadline
// ends the call at once), but once done(true) says the answer arrived it
// ends upstreamDrain later. The SDK hands the answer over as soon as it has
// read it and reads the rest of the response (the SSE stream's end)
// afterwards; the gateway's call context ends right after the answer, and a
// request whose context ends mid-read takes its connection down with it
// (bench-gateway: a new TCP connection to the upstream for one call in
// four). done(false) ends it at once.
func drainAfter(ctx context.Context) (context.Context, func(answered bool)) {
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	return dctx, func(answered bool) {
		if !answered || !stop() {
			cancel() // failed, or ctx ended first (its cancel ran)
			return
		}
		time.AfterFunc(upstreamDrain, cancel)
	}
}
