package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/revision/lease"
)

const methodCallTool = "tools/call"

// Unavailable is the failure name (in the refused result's text and
// `_meta`) when the lease service's keys, Redeem or Verify could not be had: the
// call is refused, since nothing proves the lease is good.
const Unavailable = "UNAVAILABLE"

// sweepAt is the size of the in-process used-lease memory at which expired
// entries are dropped.
const sweepAt = 1024

// Presentation is one lease presented for one call.
type Presentation struct {
	// Token is the lease.
	Token string
	// Proof is the holder proof.
	Proof string
	// Audience is this executor's audience.
	Audience string
	// Tool is the tool id about to run.
	Tool string
	// ArgumentDigest is the digest of the call's arguments.
	ArgumentDigest string
}

// Verifier is the lease service's Verify (a LeaseService client adapter).
//
// Verify checks p and consumes the lease. It returns [lease.Accepted] when
// the call may run, otherwise the failure and a detail for the caller. An
// error means no answer (service unreachable, deadline): the executor then
// refuses the call.
type Verifier interface {
	Verify(ctx context.Context, p Presentation) (lease.Failure, string, error)
}

// VerifierFunc adapts a function to [Verifier].
type VerifierFunc func(ctx context.Context, p Presentation) (lease.Failure, string, error)

// Verify implements [Verifier].
func (f VerifierFunc) Verify(ctx context.Context, p Presentation) (lease.Failure, string, error) {
	return f(ctx, p)
}

// Redeemer is the lease service's Redeem (a LeaseService client adapter):
// what the kit calls after it verified the lease and proof itself.
//
// Redeem presents the verified claims c; the service checks revocation,
// frozen issuance and freshness and consumes the lease id (single use
// across every replica). It returns [lease.Accepted] when the call may run,
// otherwise the failure and a detail for the caller. An error means no
// answer (service unreachable, deadline, single use unconfirmable): the
// executor then refuses the call.
type Redeemer interface {
	Redeem(ctx context.Context, c lease.Claims) (lease.Failure, string, error)
}

// RedeemerFunc adapts a function to [Redeemer].
type RedeemerFunc func(ctx context.Context, c lease.Claims) (lease.Failure, string, error)

// Redeem implements [Redeemer].
func (f RedeemerFunc) Redeem(ctx context.Context, c lease.Claims) (lease.Failure, string, error) {
	return f(ctx, c)
}

// Options configure [Require].
type Options struct {
	// ServerID is this server's id in toolcrib; a tool's id is
	// `<ServerID>.<tool name>`. Required.
	ServerID string
	// Audience is this executor's audience, as leases name it. Required.
	Audience string
	// Keys returns the lease service's public keys (from GetSigningKeys);
	// called for every call, so it should cache. Required.
	Keys func(ctx context.Context) (lease.KeySet, error)
	// RefreshKeys, when set, fetches the keys again, past any cache; it is
	// called once when a lease names a key Keys does not have (the lease
	// service rotated since the last fetch), and the lease is checked again.
	RefreshKeys func(ctx context.Context) (lease.KeySet, error)
	// Redeemer is called after the offline checks pass, with the verified
	// claims (LeaseService.Redeem: revocation, freeze, freshness, single use
	// across replicas; no signature checked twice). It takes precedence
	// over Verifier.
	Redeemer Redeemer
	// Verifier is called after the offline checks pass when Redeemer is
	// nil (LeaseService.Verify checks both signatures again); both nil
	// means leases are single use within this process only.
	Verifier Verifier
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Skew is the clock-skew allowance; 0 means [lease.DefaultSkew].
	Skew time.Duration
	// ProofWindow is how old a proof may be; 0 means
	// [lease.DefaultProofWindow].
	ProofWindow time.Duration
}

// Require makes every `tools/call` on server need a valid lease and proof.
// Add it once, before serving; other methods are untouched.
func Require(server *mcp.Server, opts Options) error {
	if opts.ServerID == "" || opts.Audience == "" || opts.Keys == nil {
		return errors.New("executor: ServerID, Audience and Keys are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	g := &guard{opts: opts, used: map[string]time.Time{}}
	server.AddReceivingMiddleware(g.middleware)
	return nil
}

type guard struct {
	opts    Options
	headers lease.HeaderCache

	mu   sync.Mutex
	used map[string]time.Time // lease id -> until when it is remembered
}

type claimsKey struct{}

// FromContext returns the claims of the lease the current `tools/call` runs
// under, inside a tool handler of a server with [Require].
func FromContext(ctx context.Context) (lease.Claims, bool) {
	c, ok := ctx.Value(claimsKey{}).(lease.Claims)
	return c, ok
}

// Attach puts a lease and its proof into a call's `_meta`.
func Attach(params *mcp.CallToolParams, token, proof string) {
	if params.Meta == nil {
		params.Meta = mcp.Meta{}
	}
	params.Meta[lease.MetaLease] = token
	params.Meta[lease.MetaProof] = proof
}

func (g *guard) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != methodCallTool {
			return next(ctx, method, req)
		}
		call, ok := req.(*mcp.CallToolRequest)
		if !ok || call.Params == nil {
			return refused(lease.BadSignature.String(), "no lease"), nil
		}
		claims, name, detail := g.check(ctx, call.Params)
		if claims == nil {
			return refused(name, detail), nil
		}
		return next(context.WithValue(ctx, claimsKey{}, *claims), method, req)
	}
}

// check is the whole decision for one call: the claims when it may run,
// else the failure's name and a detail.
func (g *guard) check(ctx context.Context, p *mcp.CallToolParamsRaw) (*lease.Claims, string, string) {
	token, _ := p.Meta[lease.MetaLease].(string)
	proof, _ := p.Meta[lease.MetaProof].(string)
	digest, err := lease.ArgumentDigest(p.Arguments)
	if err != nil {
		return nil, lease.ArgumentsMismatch.String(), "the call's arguments are not valid JSON"
	}
	keys, err := g.opts.Keys(ctx)
	if err != nil {
		return nil, Unavailable, "the lease service's keys are not available"
	}
	pres := Presentation{Token: token, Proof: proof, Audience: g.opts.Audience, Tool: g.opts.ServerID + "." + p.Name, ArgumentDigest: digest}
	now := g.opts.Now()
	claims, r := lease.Check(lease.Input{
		Token: token, Proof: proof, Audience: pres.Audience, Tool: pres.Tool, ArgumentDigest: digest,
		Keys: keys, Now: now, Skew: g.opts.Skew, ProofWindow: g.opts.ProofWindow, Headers: &g.headers,
	})
	if r != nil && r.Failure == lease.UnknownKey && g.opts.RefreshKeys != nil {
		if keys, err := g.opts.RefreshKeys(ctx); err == nil {
			claims, r = lease.Check(lease.Input{
				Token: token, Proof: proof, Audience: pres.Audience, Tool: pres.Tool, ArgumentDigest: digest,
				Keys: keys, Now: now, Skew: g.opts.Skew, ProofWindow: g.opts.ProofWindow, Headers: &g.headers,
			})
		}
	}
	if r != nil {
		return nil, r.Failure.String(), r.Detail
	}
	if !g.consume(claims, now) {
		return nil, lease.AlreadyUsed.String(), "this lease was already used"
	}
	switch {
	case g.opts.Redeemer != nil:
		f, detail, err := g.opts.Redeemer.Redeem(ctx, *claims)
		if err != nil {
			return nil, Unavailable, "the lease service could not redeem the lease"
		}
		if f != lease.Accepted {
			return nil, f.String(), detail
		}
	case g.opts.Verifier != nil:
		f, detail, err := g.opts.Verifier.Verify(ctx, pres)
		if err != nil {
			return nil, Unavailable, "the lease service could not verify the lease"
		}
		if f != lease.Accepted {
			return nil, f.String(), detail
		}
	}
	return claims, "", ""
}

// consume remembers the lease id in this process until the lease can no
// longer be accepted; false when it was seen before.
func (g *guard) consume(c *lease.Claims, now time.Time) bool {
	skew := g.opts.Skew
	if skew <= 0 {
		skew = lease.DefaultSkew
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.used) >= sweepAt {
		for id, until := range g.used {
			if !now.Before(until) {
				delete(g.used, id)
			}
		}
	}
	if until, seen := g.used[c.ID]; seen && now.Before(until) {
		return false
	}
	g.used[c.ID] = c.ExpiresAt.Add(skew + time.Second)
	return true
}

func refused(name, detail string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("lease refused: %s: %s", name, detail)}},
		Meta:    mcp.Meta{lease.MetaFailure: name},
	}
}
