package admissiontest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/condition"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/admission/internal/args"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
)

// A World is a registry and discovery state a test writes (the randomized
// decision test of e2e/faults): plain data, read by [StartWorld]'s service
// through the replica's sources and by [Decider] directly. What a service
// has read once it keeps (policies per epoch, generations), as a replica
// does, so a test changes a running world only by adding epochs and
// generations and by moving heads (with a larger pointer Revision).
type World struct {
	mu sync.RWMutex
	// Stale makes both Watch streams' newest heartbeat an hour old.
	Stale       bool
	Tenants     map[string]*WorldTenant
	Pointers    map[PointerKey]*WorldPointer
	Generations map[GenerationKey]map[string]WorldTool
}

// WorldTenant is a tenant's current epoch and the policies the registry
// still answers for (an epoch absent here is not kept).
type WorldTenant struct {
	Epoch    int64
	Policies map[int64]*WorldPolicy
}

// WorldGrant is one grant, to a subject or a group.
type WorldGrant struct {
	Subject, Group  string
	Scopes, Classes []string
	// Condition is the grant's CEL condition; empty for none.
	Condition string
}

// WorldContract is an approved contract.
type WorldContract struct {
	Effect       catalogv1.EffectClass
	Scope        string
	Confirmation registryv1.Confirmation
}

// WorldReview is the registry's view of a tool at one epoch.
type WorldReview struct {
	Enabled bool
	// Trust is the trust level of the tool's server.
	Trust registryv1.TrustLevel
	// Approved by descriptor digest.
	Approved map[string]WorldContract
}

// WorldPolicy is a tenant's registry state at one epoch.
type WorldPolicy struct {
	Grants  []WorldGrant
	Classes map[string][]string // class → servers it reads
	Tools   map[string]WorldReview
}

// PointerKey names a pointer.
type PointerKey struct{ Server, Class string }

// WorldPointer is a pointer's head.
type WorldPointer struct {
	Generation  int64
	Closed      bool
	Unversioned bool
	FreshUntil  time.Time
	Revision    int64
	Tenant      string
}

// GenerationKey names a generation.
type GenerationKey struct {
	Server, Class string
	Generation    int64
}

// WorldTool is one tool of a generation.
type WorldTool struct {
	DescriptorDigest, InputSchemaDigest string
	InputSchema                         []byte
}

// Update runs f with the world locked for writing.
func (w *World) Update(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
}

func (w *World) freshness() changelog.Freshness {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.Stale {
		return changelog.Freshness{At: time.Now().Add(-time.Hour)}
	}
	return changelog.Freshness{At: time.Now(), Connected: true}
}

func policyOf(tenant string, epoch int64, p *WorldPolicy) replica.Policy {
	out := replica.Policy{Tenant: tenant, Epoch: epoch, Classes: map[string][]string{}}
	for _, g := range p.Grants {
		out.Grants = append(out.Grants, decision.GrantOf(g.Subject, g.Group, slices.Clone(g.Scopes), slices.Clone(g.Classes), g.Condition))
	}
	for c, s := range p.Classes {
		out.Classes[c] = slices.Clone(s)
	}
	return out
}

func (w *World) Current(_ context.Context, tenant string) (replica.Policy, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	tn := w.Tenants[tenant]
	if tn == nil {
		return replica.Policy{}, replica.ErrNotFound
	}
	return policyOf(tenant, tn.Epoch, tn.Policies[tn.Epoch]), nil
}

func (w *World) PolicyAt(_ context.Context, tenant string, epoch int64) (replica.Policy, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	tn := w.Tenants[tenant]
	if tn == nil {
		return replica.Policy{}, replica.ErrNotFound
	}
	p := tn.Policies[epoch]
	if p == nil || epoch > tn.Epoch {
		return replica.Policy{}, replica.ErrNotKept
	}
	return policyOf(tenant, epoch, p), nil
}

func (w *World) Generation(_ context.Context, server, class string, gen int64) (*replica.Generation, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	tools, ok := w.Generations[GenerationKey{server, class, gen}]
	if !ok {
		return nil, replica.ErrNotFound
	}
	g := &replica.Generation{ServerID: server, Class: class, Generation: gen,
		State: catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN, Tools: map[string]*replica.ToolEntry{}}
	for id, t := range tools {
		g.Tools[id] = &replica.ToolEntry{ToolID: id, Name: id, DescriptorDigest: t.DescriptorDigest,
			InputSchemaDigest: t.InputSchemaDigest, InputSchema: t.InputSchema}
	}
	return g, nil
}

func (w *World) Review(_ context.Context, tenant string, epoch int64, _, toolID, digest string) (decision.Review, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	tn := w.Tenants[tenant]
	if tn == nil || tn.Policies[epoch] == nil {
		return decision.Review{}, replica.ErrNotKept
	}
	r, ok := tn.Policies[epoch].Tools[toolID]
	if !ok {
		return decision.Review{}, nil
	}
	out := decision.Review{Known: true, Enabled: r.Enabled, Trust: r.Trust}
	if c, ok := r.Approved[digest]; ok {
		out.Approved = &decision.Contract{Effect: c.Effect, Scope: c.Scope, Confirmation: c.Confirmation}
	}
	return out, nil
}

func (w *World) Pointer(_ context.Context, server, class string) (replica.Pointer, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	p := w.Pointers[PointerKey{server, class}]
	if p == nil {
		return replica.Pointer{}, replica.ErrNotFound
	}
	return pointerOf(server, class, p), nil
}

func pointerOf(server, class string, p *WorldPointer) replica.Pointer {
	return replica.Pointer{ServerID: server, Class: class, Tenant: p.Tenant, Generation: p.Generation,
		Closed: p.Closed, Unversioned: p.Unversioned, FreshUntil: p.FreshUntil, Revision: p.Revision}
}

// StartWorld runs the service as [Start] does, over w instead of seed
// 004's world: the replica reads w on a miss, and its heads learn w's
// epochs and pointers on [Service.Sync] (as the Watch streams would
// deliver them). Its streams are fresh unless w.Stale.
func StartWorld(t testing.TB, o Options, w *World) *Service {
	t.Helper()
	s := start(t, o, w, w.freshness)
	s.world = w
	s.Sync()
	return s
}

// Sync delivers the world's heads to the replica: every tenant's epoch
// and every pointer (a head is replaced only by a larger revision).
func (s *Service) Sync() {
	w := s.world
	w.mu.RLock()
	defer w.mu.RUnlock()
	for name, tn := range w.Tenants {
		s.heads.SetEpoch(name, tn.Epoch)
	}
	for k, p := range w.Pointers {
		s.heads.SetPointer(pointerOf(k.Server, k.Class, p))
	}
}

// Decider decides Checks over a [World] with admission's decision package
// and argument validator alone (no cache, no service, no I/O), gathering
// the facts as the service does. The randomized decision test plays most
// of its rounds through it.
type Decider struct{ v *args.Validator }

// NewDecider returns a decider with its own compiled-schema cache.
func NewDecider() *Decider { return &Decider{v: args.NewValidator(1000)} }

// Decide returns the reason and detail admission's rules give req from p
// at now over w, asserted by no confirmer. Fresh is the replica's
// freshness (w.Stale is ignored).
func (d *Decider) Decide(w *World, now time.Time, p principal.Principal, req *admissionv1.CheckRequest) (catalogv1.DecisionReason, string) {
	return d.DecideConfirmed(w, now, p, "", req)
}

// DecideConfirmed is [Decider.Decide] for a request beside which the
// confirmer with subject confirmer (a verified token of the confirmer
// role; "" for none) asserted the user's confirmation.
func (d *Decider) DecideConfirmed(w *World, now time.Time, p principal.Principal, confirmer string, req *admissionv1.CheckRequest) (catalogv1.DecisionReason, string) {
	ctx := context.Background()
	r := decision.Request{ToolID: req.GetToolId(), Generation: req.GetGeneration(), DescriptorDigest: req.GetDescriptorDigest(),
		PolicyEpoch: req.GetPolicyEpoch(), Mode: req.GetMode(), RunID: req.GetRunId(), AudienceClass: req.GetAudienceClass(),
		ShownDigest: req.GetShownDigest()}
	parsed, problem := args.Parse(req.GetArguments(), args.DefaultLimits)
	r.ArgumentsProblem = problem
	f := decision.Facts{Now: now, Request: r, Tenant: p.Tenant, Confirmer: confirmer}
	if !w.Stale {
		f.PolicyFreshUntil = now.Add(5 * time.Second)
	}
	if o, done := decision.Early(f); done {
		return o.Reason, o.Detail
	}
	cur, err := w.Current(ctx, p.Tenant)
	if err != nil { // unknown tenant: sees nothing
		o := decision.Prelim(f)
		return o.Reason, o.Detail
	}
	f.Current = decision.Effective(cur.Grants, p.Subject, p.Groups)
	if r.PolicyEpoch > 0 && r.PolicyEpoch < cur.Epoch {
		if old, err := w.PolicyAt(ctx, p.Tenant, r.PolicyEpoch); err == nil {
			a := decision.Effective(old.Grants, p.Subject, p.Groups)
			f.Planned = &a
		}
	}
	server := decision.ServerOf(r.ToolID)
	for _, c := range f.Current.Classes {
		if (r.AudienceClass == "" || c == r.AudienceClass) && slices.Contains(cur.Classes[c], server) {
			f.Class, f.Reachable = c, true
			break
		}
	}
	var schema []byte
	var schemaDigest string
	if f.Reachable {
		if ptr, err := w.Pointer(ctx, server, f.Class); err == nil {
			f.Pointer = &decision.Pointer{Generation: ptr.Generation, Closed: ptr.Closed, Unversioned: ptr.Unversioned, FreshUntil: ptr.FreshUntil}
			if g, err := w.Generation(ctx, server, f.Class, ptr.Generation); err == nil {
				if t := g.Tools[r.ToolID]; t != nil {
					f.ActiveTool = &decision.Tool{DescriptorDigest: t.DescriptorDigest, InputSchemaDigest: t.InputSchemaDigest}
					schema, schemaDigest = t.InputSchema, t.InputSchemaDigest
					f.Review, _ = w.Review(ctx, p.Tenant, cur.Epoch, f.Class, r.ToolID, t.DescriptorDigest)
				}
			}
			switch {
			case r.Generation == ptr.Generation:
				f.PlanTool = f.ActiveTool
			case r.Generation < ptr.Generation:
				if g, err := w.Generation(ctx, server, f.Class, r.Generation); err == nil {
					if t := g.Tools[r.ToolID]; t != nil {
						f.PlanTool = &decision.Tool{DescriptorDigest: t.DescriptorDigest, InputSchemaDigest: t.InputSchemaDigest}
					}
				}
			}
		}
	}
	pre := decision.Prelim(f)
	if !decision.Completes(pre.Reason) {
		return pre.Reason, pre.Detail
	}
	ac := d.v.Check(schemaDigest, func() ([]byte, error) { return schema, nil }, parsed.Value)
	var cc decision.ConditionCheck
	if ac.Problem == "" {
		c := f.Review.Approved
		in := &condition.Input{
			Principal: condition.Principal{Subject: p.Subject, Tenant: p.Tenant, Groups: p.Groups, Claims: p.Claims},
			Tool: condition.Tool{ID: r.ToolID, Server: server, Effect: decision.EffectName(c.Effect), Scopes: []string{c.Scope},
				ApprovalDigest: c.ApprovalDigest},
			Args:    parsed.Value,
			Request: condition.Request{Mode: decision.ModeName(r.Mode), RunID: r.RunID, Time: now},
		}
		cc = decision.Conditions(cur.Grants, p.Subject, p.Groups, c.Scope, f.Class, in)
	}
	o := decision.Final(pre, ac, cc)
	return o.Reason, o.Detail
}
