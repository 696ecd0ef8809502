package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	oracle "github.com/toolcrib/toolcrib/e2e/admissionoracle"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/faultreport"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/admission/admissiontest"
)

// Environment of the randomized decision test.
const (
	// RoundsEnv sets the number of rounds (default a CI share).
	RoundsEnv = "TOOLCRIB_ADMISSION_ROUNDS"
	// SeedEnv replays one decision-package round with a trace.
	SeedEnv = "TOOLCRIB_ADMISSION_SEED"
	// SeedBaseEnv repeats a run.
	SeedBaseEnv = "TOOLCRIB_ADMISSION_SEED_BASE"
)

// ciRounds is the share `go test` plays; `make faults` plays 100,000.
const ciRounds = 2000

// grpcShare: one round in grpcShare goes through the real service.
const grpcShare = 4

// The random world's names.
var (
	rTenants  = []string{"t-a", "t-b"}
	rStranger = "t-c" // a tenant the registry does not know
	rServers  = []string{"inv", "pay"}
	rNames    = []string{"status", "cancel", "reserve"}
	rScopes   = []string{"inv:read", "inv:write", "pay:read"}
	rSubjects = []string{"alice", "bob", "carol"}
	rGroups   = []string{"staff", "ops"}
	rEffects  = []catalogv1.EffectClass{catalogv1.EffectClass_EFFECT_CLASS_UNSPECIFIED, catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY,
		catalogv1.EffectClass_EFFECT_CLASS_RESERVATION, catalogv1.EffectClass_EFFECT_CLASS_WRITE, catalogv1.EffectClass_EFFECT_CLASS_DESTRUCTIVE}
	rConfirm = []registryv1.Confirmation{registryv1.Confirmation_CONFIRMATION_UNSPECIFIED,
		registryv1.Confirmation_CONFIRMATION_AUTONOMOUS_ALLOWED, registryv1.Confirmation_CONFIRMATION_ALWAYS}
	rSchemas = []oracle.Schema{
		{Props: []oracle.Prop{{Name: "shipment_id", Type: "string"}}, Required: []string{"shipment_id"}},
		{Props: []oracle.Prop{{Name: "units", Type: "integer"}, {Name: "note", Type: "string"}}, Closed: true},
		{},
		{Props: []oracle.Prop{{Name: "flag", Type: "boolean"}, {Name: "ratio", Type: "number"}}, Required: []string{"flag"}, Closed: true},
	}
	rArguments = []string{``, `{}`, `{"shipment_id":"s-1"}`, `{"shipment_id":7}`, `{"units":3}`, `{"units":1.5}`,
		`{"units":2.0}`, `{"units":3,"note":"x"}`, `{"flag":true}`, `{"flag":true,"ratio":0.5}`, `{"flag":"yes"}`,
		`{"extra":1}`, `{"shipment_id":"s-2","extra":null}`, `{ "flag" : false }`}
)

func rDigest(n int) string {
	h := sha256.Sum256([]byte("descriptor-" + strconv.Itoa(n)))
	return "sha256:" + hex.EncodeToString(h[:])
}

// renderedSchema is a schema as JSON with its digest.
type renderedSchema struct {
	json   []byte
	digest string
}

// rendered holds each schema of rSchemas rendered (a round renders its
// tools' schemas many times).
var rendered = func() []renderedSchema {
	var out []renderedSchema
	for _, s := range rSchemas {
		b := s.JSON()
		h := sha256.Sum256(b)
		out = append(out, renderedSchema{b, "sha256:" + hex.EncodeToString(h[:])})
	}
	return out
}()

func sameSchema(a, b oracle.Schema) bool {
	return a.Closed == b.Closed && slices.Equal(a.Props, b.Props) && slices.Equal(a.Required, b.Required)
}

// schemaJSON returns s as JSON with its digest.
func schemaJSON(s oracle.Schema) ([]byte, string) {
	for i, r := range rSchemas {
		if sameSchema(r, s) {
			return rendered[i].json, rendered[i].digest
		}
	}
	b := s.JSON()
	h := sha256.Sum256(b)
	return b, "sha256:" + hex.EncodeToString(h[:])
}

func classesOf(tenant string) []string { return []string{tenant + ".readers", tenant + ".ops"} }

func toolIDs(server string) []string {
	out := make([]string, len(rNames))
	for i, n := range rNames {
		out[i] = server + "." + n
	}
	return out
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

func chance(r *rand.Rand, p float64) bool { return r.Float64() < p }

// gen builds random states and requests and evolves states.
type gen struct {
	r   *rand.Rand
	now time.Time
	// digests counts the digests handed out, so a changed tool gets a
	// new one.
	digests int
	maxGen  map[oracle.PointerKey]int64
	rev     int64
}

func newGen(seed uint64, now time.Time) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: now, maxGen: map[oracle.PointerKey]int64{}}
}

func (g *gen) freshUntil() time.Time {
	if chance(g.r, 0.05) {
		return g.now.Add(-time.Hour)
	}
	return g.now.Add(time.Hour)
}

func (g *gen) tool() oracle.Tool {
	g.digests++
	return oracle.Tool{Digest: rDigest(g.digests), Schema: pick(g.r, rSchemas)}
}

// nextGeneration derives a generation from prev: tools added, changed
// (new digest, maybe a new schema) and removed.
func (g *gen) nextGeneration(server string, prev map[string]oracle.Tool) map[string]oracle.Tool {
	out := map[string]oracle.Tool{}
	for _, id := range toolIDs(server) {
		t, ok := prev[id]
		switch {
		case !ok && (prev == nil && chance(g.r, 0.9) || chance(g.r, 0.3)):
			out[id] = g.tool()
		case ok && chance(g.r, 0.1): // removed
		case ok && chance(g.r, 0.25):
			out[id] = g.tool()
		case ok:
			out[id] = t
		}
	}
	return out
}

func (g *gen) contract(server string) oracle.Contract {
	scope := server + ":read"
	if chance(g.r, 0.4) {
		scope = pick(g.r, rScopes)
	}
	return oracle.Contract{Effect: pick(g.r, rEffects), Scope: scope, Confirmation: pick(g.r, rConfirm)}
}

func (g *gen) grant(tenant string) oracle.Grant {
	gr := oracle.Grant{}
	if chance(g.r, 0.6) {
		gr.Subject = pick(g.r, rSubjects)
	} else {
		gr.Group = pick(g.r, rGroups)
	}
	for _, s := range rScopes {
		if chance(g.r, 0.5) {
			gr.Scopes = append(gr.Scopes, s)
		}
	}
	for _, c := range classesOf(tenant) {
		if chance(g.r, 0.6) {
			gr.Classes = append(gr.Classes, c)
		}
	}
	if len(gr.Classes) == 0 {
		gr.Classes = []string{tenant + ".readers"}
	}
	if chance(g.r, 0.35) {
		gr.Condition = g.condition()
	}
	return gr
}

// condition draws a condition of the family the oracle models (issue 25).
func (g *gen) condition() oracle.Cond {
	switch g.r.IntN(6) {
	case 0:
		return oracle.Cond{Kind: oracle.CondRun}
	case 1:
		return oracle.Cond{Kind: oracle.CondUnitsAtMost, N: g.r.IntN(20)}
	case 2:
		return oracle.Cond{Kind: oracle.CondGroup, Name: pick(g.r, rGroups)}
	case 3:
		return oracle.Cond{Kind: oracle.CondSubject, Name: pick(g.r, rSubjects)}
	case 4:
		return oracle.Cond{Kind: oracle.CondReadOnly}
	}
	return oracle.Cond{Kind: oracle.CondFalse}
}

// digestsOf lists every digest a tool has in any generation of s.
func digestsOf(s *oracle.State, id string) []string {
	var out []string
	for _, tools := range s.Generations {
		if t, ok := tools[id]; ok && !slices.Contains(out, t.Digest) {
			out = append(out, t.Digest)
		}
	}
	slices.Sort(out)
	return out
}

func (g *gen) firstPolicy(s *oracle.State, tenant string) *oracle.Policy {
	p := &oracle.Policy{Classes: map[string][]string{}, Tools: map[string]oracle.ToolReview{}}
	for range 1 + g.r.IntN(3) {
		p.Grants = append(p.Grants, g.grant(tenant))
	}
	for _, c := range classesOf(tenant) {
		for _, srv := range rServers {
			if chance(g.r, 0.85) {
				p.Classes[c] = append(p.Classes[c], srv)
			}
		}
	}
	for _, srv := range rServers {
		for _, id := range toolIDs(srv) {
			if !chance(g.r, 0.9) {
				continue
			}
			rv := oracle.ToolReview{Enabled: chance(g.r, 0.85), Trust: g.trust(), Approved: map[string]oracle.Contract{}}
			for _, d := range digestsOf(s, id) {
				if chance(g.r, 0.75) {
					rv.Approved[d] = g.contract(srv)
				}
			}
			p.Tools[id] = rv
		}
	}
	return p
}

// trust is a server's trust level: mostly first-party, and every other
// level (unknown included) often enough to reach the confirmation rule.
func (g *gen) trust() registryv1.TrustLevel {
	switch n := g.r.IntN(10); {
	case n < 6:
		return registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY
	case n < 8:
		return registryv1.TrustLevel_TRUST_LEVEL_PARTNER
	case n < 9:
		return registryv1.TrustLevel_TRUST_LEVEL_THIRD_PARTY
	}
	return registryv1.TrustLevel_TRUST_LEVEL_UNSPECIFIED
}

func clonePolicy(p *oracle.Policy) *oracle.Policy {
	out := &oracle.Policy{Classes: map[string][]string{}, Tools: map[string]oracle.ToolReview{}}
	for _, gr := range p.Grants {
		out.Grants = append(out.Grants, oracle.Grant{Subject: gr.Subject, Group: gr.Group,
			Scopes: slices.Clone(gr.Scopes), Classes: slices.Clone(gr.Classes), Condition: gr.Condition})
	}
	for c, s := range p.Classes {
		out.Classes[c] = slices.Clone(s)
	}
	for id, rv := range p.Tools {
		out.Tools[id] = oracle.ToolReview{Enabled: rv.Enabled, Trust: rv.Trust, Approved: maps.Clone(rv.Approved)}
	}
	return out
}

// nextPolicy is one registry change: a grant revoked, added or narrowed,
// a tool enabled or disabled, a digest approved or unapproved, a class
// reading a server or not.
func (g *gen) nextPolicy(s *oracle.State, tenant string, prev *oracle.Policy) *oracle.Policy {
	p := clonePolicy(prev)
	srv := pick(g.r, rServers)
	id := pick(g.r, toolIDs(srv))
	switch g.r.IntN(7) {
	case 6: // a grant's condition set, changed or removed
		if len(p.Grants) > 0 {
			gr := &p.Grants[g.r.IntN(len(p.Grants))]
			gr.Condition = oracle.Cond{}
			if chance(g.r, 0.7) {
				gr.Condition = g.condition()
			}
		}
	case 0:
		if len(p.Grants) > 0 {
			i := g.r.IntN(len(p.Grants))
			p.Grants = slices.Delete(p.Grants, i, i+1)
		}
	case 1:
		p.Grants = append(p.Grants, g.grant(tenant))
	case 2:
		if len(p.Grants) > 0 {
			gr := &p.Grants[g.r.IntN(len(p.Grants))]
			if len(gr.Scopes) > 0 {
				i := g.r.IntN(len(gr.Scopes))
				gr.Scopes = slices.Delete(gr.Scopes, i, i+1)
			}
		}
	case 3:
		rv, ok := p.Tools[id]
		if !ok {
			rv = oracle.ToolReview{Trust: g.trust(), Approved: map[string]oracle.Contract{}}
		}
		rv.Enabled = !rv.Enabled
		if chance(g.r, 0.2) {
			rv.Trust = g.trust() // the server's trust level changed (an epoch bump too)
		}
		p.Tools[id] = rv
	case 4:
		rv, ok := p.Tools[id]
		if !ok {
			rv = oracle.ToolReview{Enabled: true, Trust: g.trust(), Approved: map[string]oracle.Contract{}}
		}
		if ds := digestsOf(s, id); len(ds) > 0 {
			d := pick(g.r, ds)
			if _, ok := rv.Approved[d]; ok {
				delete(rv.Approved, d)
			} else {
				rv.Approved[d] = g.contract(srv)
			}
		}
		p.Tools[id] = rv
	case 5:
		c := pick(g.r, classesOf(tenant))
		if slices.Contains(p.Classes[c], srv) {
			p.Classes[c] = slices.DeleteFunc(p.Classes[c], func(x string) bool { return x == srv })
		} else {
			p.Classes[c] = append(p.Classes[c], srv)
		}
	}
	return p
}

// state builds a random state: generations per (server, class) with
// tools added, changed and removed, some old ones not kept; pointers
// (some closed, unversioned or past fresh_until, some absent); tenants with
// epochs of registry changes, some old epochs not kept.
func (g *gen) state() *oracle.State {
	s := &oracle.State{Now: g.now, Fresh: chance(g.r, 0.96), Tenants: map[string]*oracle.Tenant{},
		Pointers: map[oracle.PointerKey]*oracle.Pointer{}, Generations: map[oracle.GenKey]map[string]oracle.Tool{}}
	for _, tn := range rTenants {
		for _, c := range classesOf(tn) {
			for _, srv := range rServers {
				if chance(g.r, 0.08) {
					continue // never proven
				}
				k := oracle.PointerKey{Server: srv, Class: c}
				n := int64(1 + g.r.IntN(5))
				var prev map[string]oracle.Tool
				for i := int64(1); i <= n; i++ {
					prev = g.nextGeneration(srv, prev)
					s.Generations[oracle.GenKey{Server: srv, Class: c, Generation: i}] = prev
				}
				g.maxGen[k] = n
				active := n
				if n > 1 && chance(g.r, 0.15) {
					active = n - 1 // rolled back
				}
				for i := int64(1); i < n; i++ {
					if i != active && chance(g.r, 0.25) {
						delete(s.Generations, oracle.GenKey{Server: srv, Class: c, Generation: i})
					}
				}
				s.Pointers[k] = &oracle.Pointer{Generation: active, Closed: chance(g.r, 0.05),
					Unversioned: chance(g.r, 0.12), FreshUntil: g.freshUntil()}
			}
		}
	}
	for _, tn := range rTenants {
		t := &oracle.Tenant{Epoch: int64(1 + g.r.IntN(6)), Policies: map[int64]*oracle.Policy{}}
		p := g.firstPolicy(s, tn)
		for e := int64(1); e <= t.Epoch; e++ {
			if e > 1 {
				p = g.nextPolicy(s, tn, p)
			}
			t.Policies[e] = p
		}
		for e := int64(1); e < t.Epoch; e++ {
			if chance(g.r, 0.2) {
				delete(t.Policies, e)
			}
		}
		s.Tenants[tn] = t
	}
	return s
}

// evolve applies one change to s as the services would: a registry change
// (a new epoch), a scan (a new generation, the pointer moved to it), a
// rollback, a close, a refresh or its failure, or the replica's streams
// going stale or catching up. Only additions and head moves: a replica
// keeps what it read.
func (g *gen) evolve(s *oracle.State) {
	if !s.Fresh && chance(g.r, 0.7) {
		s.Fresh = true // the streams caught up
		return
	}
	switch n := g.r.IntN(20); {
	case n < 8:
		tn := pick(g.r, rTenants)
		t := s.Tenants[tn]
		t.Epoch++
		t.Policies[t.Epoch] = g.nextPolicy(s, tn, t.Policies[t.Epoch-1])
	case n < 14:
		k := oracle.PointerKey{Server: pick(g.r, rServers), Class: pick(g.r, classesOf(pick(g.r, rTenants)))}
		prev := s.Generations[oracle.GenKey{Server: k.Server, Class: k.Class, Generation: g.maxGen[k]}]
		g.maxGen[k]++
		s.Generations[oracle.GenKey{Server: k.Server, Class: k.Class, Generation: g.maxGen[k]}] = g.nextGeneration(k.Server, prev)
		s.Pointers[k] = &oracle.Pointer{Generation: g.maxGen[k], Unversioned: chance(g.r, 0.15), FreshUntil: g.now.Add(time.Hour)}
	case n < 19:
		keys := slices.SortedFunc(maps.Keys(s.Pointers), func(a, b oracle.PointerKey) int {
			return strings.Compare(a.Server+" "+a.Class, b.Server+" "+b.Class)
		})
		if len(keys) == 0 {
			return
		}
		k := pick(g.r, keys)
		p := *s.Pointers[k]
		switch g.r.IntN(4) {
		case 0: // rollback to an older kept generation
			for i := p.Generation - 1; i >= 1; i-- {
				if _, ok := s.Generations[oracle.GenKey{Server: k.Server, Class: k.Class, Generation: i}]; ok {
					p.Generation = i
					break
				}
			}
		case 1:
			p.Closed = true
		case 2:
			p.FreshUntil = g.now.Add(-time.Hour) // refreshes failing
		case 3:
			p.FreshUntil = g.now.Add(time.Hour) // a proven refresh
		}
		s.Pointers[k] = &p
	default:
		s.Fresh = false
	}
}

// request builds a random Check, most of them well formed and about the
// state's tools; one in eight has exactly one malformed field.
func (g *gen) request(s *oracle.State) oracle.Request {
	r := g.r
	q := oracle.Request{Subject: pick(r, rSubjects), Mode: admissionv1.Mode_MODE_AUTONOMOUS}
	switch n := r.IntN(20); {
	case n < 9:
		q.Tenant = "t-a"
	case n < 19:
		q.Tenant = "t-b"
	default:
		q.Tenant = rStranger
	}
	var epoch int64 = 1
	t := s.Tenants[q.Tenant]
	if t != nil {
		epoch = t.Epoch
	}
	for _, gr := range rGroups {
		if chance(r, 0.3) {
			q.Groups = append(q.Groups, gr)
		}
	}
	if t != nil && len(t.Policies[epoch].Grants) > 0 && chance(r, 0.9) { // someone the policy names
		gr := pick(r, t.Policies[epoch].Grants)
		if gr.Subject != "" {
			q.Subject = gr.Subject
		} else if !slices.Contains(q.Groups, gr.Group) {
			q.Groups = append(q.Groups, gr.Group)
		}
	}
	srv := pick(r, rServers)
	q.ToolID = pick(r, toolIDs(srv))
	if chance(r, 0.05) {
		q.ToolID = srv + ".ghost"
	}
	switch n := r.IntN(20); {
	case n < 14:
	case n < 18:
		q.Class = pick(r, classesOf(q.Tenant))
	case n < 19:
		q.Class = pick(r, classesOf(pick(r, rTenants)))
	default:
		q.Class = q.Tenant + ".nope"
	}
	// The plan's generation: mostly one a pointer of the server had.
	var gens []int64
	var active []oracle.Tool
	for _, k := range slices.SortedFunc(maps.Keys(s.Pointers), func(a, b oracle.PointerKey) int {
		return strings.Compare(a.Server+" "+a.Class, b.Server+" "+b.Class)
	}) {
		if p := s.Pointers[k]; k.Server == srv {
			gens = append(gens, p.Generation, p.Generation, max(1, p.Generation-1), max(1, p.Generation-2), p.Generation+1)
			if tl, ok := s.Generations[oracle.GenKey{Server: k.Server, Class: k.Class, Generation: p.Generation}][q.ToolID]; ok {
				active = append(active, tl)
			}
		}
	}
	q.Generation = int64(1 + r.IntN(7))
	if len(gens) > 0 && chance(r, 0.85) {
		q.Generation = pick(r, gens)
	}
	ds := digestsOf(s, q.ToolID)
	schema := pick(r, rSchemas)
	switch n := r.IntN(20); {
	case n < 12 && len(active) > 0:
		tl := pick(r, active)
		q.Digest, schema = tl.Digest, tl.Schema
	case n < 16 && len(ds) > 0:
		q.Digest = pick(r, ds)
	default:
		q.Digest = rDigest(r.IntN(g.digests + 2))
	}
	switch n := r.IntN(20); {
	case n < 4:
	case n < 10:
		q.PlanEpoch = epoch
	case n < 18:
		q.PlanEpoch = max(1, epoch-int64(1+r.IntN(3)))
	default:
		q.PlanEpoch = epoch + 1
	}
	if chance(r, 0.45) {
		q.Mode = admissionv1.Mode_MODE_USER_CONFIRMED
		// Mostly asserted by a confirmer (so rounds get past the rule),
		// else by a token that is none.
		switch n := r.IntN(20); {
		case n < 15:
			q.Confirmer = oracle.PlatformConfirmer
		default:
			q.Confirmer = pick(r, []oracle.Confirmer{oracle.NoConfirmer, oracle.TenantConfirmerGroup, oracle.PlatformService, oracle.InvalidConfirmerToken})
		}
		if chance(r, 0.5) {
			q.ShownDigest = rDigest(r.IntN(4))
		}
	} else if chance(r, 0.05) {
		q.Confirmer = oracle.PlatformConfirmer // beside an autonomous call: ignored
	}
	if chance(r, 0.3) {
		q.RunID = "run-" + strconv.Itoa(r.IntN(100))
	}
	if chance(r, 0.65) {
		q.Arguments = g.arguments(schema)
	} else {
		q.Arguments = []byte(pick(r, rArguments))
	}
	if t != nil && chance(r, 0.5) {
		g.target(s, &q, t.Policies[epoch])
	}
	if chance(r, 0.125) { // exactly one malformed field
		switch r.IntN(9) {
		case 0:
			q.ToolID = pick(r, []string{"", "nodot", "Inv.status", "inv.bad name", "inv." + strings.Repeat("x", 129), "-x.y", srv + "."})
		case 1:
			q.Class = pick(r, []string{"NoDot", "t-a.", ".x", "T-A.readers", q.Tenant + ".Bad"})
		case 2:
			q.Generation = int64(-r.IntN(2))
		case 3:
			q.Digest = pick(r, []string{"", "sha256:XYZ", "md5:" + strings.Repeat("a", 32), "sha256:" + strings.Repeat("A", 64), rDigest(1) + "0"})
		case 4:
			q.PlanEpoch = -1 - int64(r.IntN(3))
		case 5:
			q.Mode = pick(r, []admissionv1.Mode{admissionv1.Mode_MODE_UNSPECIFIED, admissionv1.Mode(7)})
		case 6:
			q.RunID = pick(r, []string{"bad run", "-lead", strings.Repeat("r", 129), "ü"})
		case 7:
			q.Arguments = []byte(pick(r, []string{`[]`, `"text"`, `null`, `{bad`, ` `, `{"a":1}x`, `7`}))
		case 8:
			q.ShownDigest = pick(r, []string{"sha256:XYZ", "md5:" + strings.Repeat("a", 32), rDigest(1) + "0"})
		}
	}
	return q
}

// target aims q at a tool the principal can reach under the current
// policy p: a grant's subject or group, one of its classes reading a
// server, a tool of that pointer's active generation (mostly at its
// active digest), so that rounds get past NOT_FOUND to the later rules.
func (g *gen) target(s *oracle.State, q *oracle.Request, p *oracle.Policy) {
	r := g.r
	type aim struct {
		grant         oracle.Grant
		class, server string
	}
	var aims []aim
	for _, gr := range p.Grants {
		for _, c := range gr.Classes {
			for _, srv := range p.Classes[c] {
				aims = append(aims, aim{gr, c, srv})
			}
		}
	}
	if len(aims) == 0 {
		return
	}
	a := pick(r, aims)
	if a.grant.Subject != "" {
		q.Subject = a.grant.Subject
	} else if !slices.Contains(q.Groups, a.grant.Group) {
		q.Groups = append(q.Groups, a.grant.Group)
	}
	q.Class = ""
	if chance(r, 0.3) {
		q.Class = a.class
	}
	ptr := s.Pointers[oracle.PointerKey{Server: a.server, Class: a.class}]
	if ptr == nil {
		q.ToolID = pick(r, toolIDs(a.server))
		return
	}
	tools := s.Generations[oracle.GenKey{Server: a.server, Class: a.class, Generation: ptr.Generation}]
	ids := slices.Sorted(maps.Keys(tools))
	if len(ids) == 0 {
		return
	}
	q.ToolID = pick(r, ids)
	tl := tools[q.ToolID]
	switch n := r.IntN(10); {
	case n < 6:
		q.Generation = ptr.Generation
	case n < 9:
		q.Generation = max(1, ptr.Generation-int64(1+r.IntN(2)))
	default:
		q.Generation = ptr.Generation + 1
	}
	q.Digest = tl.Digest
	if ds := digestsOf(s, q.ToolID); chance(r, 0.25) && len(ds) > 0 {
		q.Digest = pick(r, ds)
	}
	if chance(r, 0.8) {
		q.Arguments = g.arguments(tl.Schema)
	}
}

// arguments returns arguments for schema: usually valid, sometimes with
// one wrong type, a missing required property or an unknown one.
func (g *gen) arguments(schema oracle.Schema) []byte {
	r := g.r
	m := map[string]any{}
	value := func(typ string) any {
		switch typ {
		case "string":
			return "v-" + strconv.Itoa(r.IntN(9))
		case "integer":
			return r.IntN(50) - 10
		case "number":
			return float64(r.IntN(100)) / 8
		}
		return chance(r, 0.5)
	}
	for _, p := range schema.Props {
		if slices.Contains(schema.Required, p.Name) || chance(r, 0.5) {
			m[p.Name] = value(p.Type)
		}
	}
	switch r.IntN(8) {
	case 0:
		if len(schema.Props) > 0 {
			p := pick(r, schema.Props)
			m[p.Name] = pick(r, []any{"s", 1.25, true, nil, []any{1}, map[string]any{}})
		}
	case 1:
		if len(schema.Required) > 0 {
			delete(m, pick(r, schema.Required))
		}
	case 2:
		m["unknown"] = 1
	}
	b, _ := json.Marshal(m)
	return b
}

// worldOf converts an oracle state into the seam's world (fresh copy).
func worldOf(s *oracle.State) *admissiontest.World {
	w := &admissiontest.World{Stale: !s.Fresh, Tenants: map[string]*admissiontest.WorldTenant{},
		Pointers: map[admissiontest.PointerKey]*admissiontest.WorldPointer{}, Generations: map[admissiontest.GenerationKey]map[string]admissiontest.WorldTool{}}
	fillWorld(w, s, 0)
	return w
}

// fillWorld writes s into w; pointers get revision rev (0: 1).
func fillWorld(w *admissiontest.World, s *oracle.State, rev int64) {
	w.Stale = !s.Fresh
	for name, t := range s.Tenants {
		wt := &admissiontest.WorldTenant{Epoch: t.Epoch, Policies: map[int64]*admissiontest.WorldPolicy{}}
		for e, p := range t.Policies {
			wp := &admissiontest.WorldPolicy{Classes: p.Classes, Tools: map[string]admissiontest.WorldReview{}}
			for _, gr := range p.Grants {
				wp.Grants = append(wp.Grants, admissiontest.WorldGrant{Subject: gr.Subject, Group: gr.Group, Scopes: gr.Scopes, Classes: gr.Classes,
					Condition: gr.Condition.CEL()})
			}
			for id, rv := range p.Tools {
				wr := admissiontest.WorldReview{Enabled: rv.Enabled, Trust: rv.Trust, Approved: map[string]admissiontest.WorldContract{}}
				for d, c := range rv.Approved {
					wr.Approved[d] = admissiontest.WorldContract{Effect: c.Effect, Scope: c.Scope, Confirmation: c.Confirmation}
				}
				wp.Tools[id] = wr
			}
			wt.Policies[e] = wp
		}
		w.Tenants[name] = wt
	}
	for k, tools := range s.Generations {
		wk := admissiontest.GenerationKey{Server: k.Server, Class: k.Class, Generation: k.Generation}
		if _, ok := w.Generations[wk]; ok {
			continue // immutable once written
		}
		wt := map[string]admissiontest.WorldTool{}
		for id, t := range tools {
			js, digest := schemaJSON(t.Schema)
			wt[id] = admissiontest.WorldTool{DescriptorDigest: t.Digest, InputSchemaDigest: digest, InputSchema: js}
		}
		w.Generations[wk] = wt
	}
	for k, p := range s.Pointers {
		wk := admissiontest.PointerKey{Server: k.Server, Class: k.Class}
		np := &admissiontest.WorldPointer{Generation: p.Generation, Closed: p.Closed, Unversioned: p.Unversioned,
			FreshUntil: p.FreshUntil, Revision: max(rev, 1), Tenant: strings.SplitN(k.Class, ".", 2)[0]}
		if old := w.Pointers[wk]; old != nil {
			if *old == (admissiontest.WorldPointer{Generation: np.Generation, Closed: np.Closed, Unversioned: np.Unversioned,
				FreshUntil: np.FreshUntil, Revision: old.Revision, Tenant: np.Tenant}) {
				continue // unchanged: same revision
			}
		}
		w.Pointers[wk] = np
	}
}

func checkRequest(q oracle.Request) *admissionv1.CheckRequest {
	return &admissionv1.CheckRequest{ToolId: q.ToolID, Generation: q.Generation, DescriptorDigest: q.Digest,
		PolicyEpoch: q.PlanEpoch, Arguments: q.Arguments, Mode: q.Mode, RunId: q.RunID, AudienceClass: q.Class,
		ShownDigest: q.ShownDigest}
}

// confirmerSubject is the confirmer admission verifies from q's confirmer
// header: the subject of a platform confirmer's token, else none.
func confirmerSubject(q oracle.Request) string {
	if q.Confirmer == oracle.PlatformConfirmer {
		return "test-confirmer"
	}
	return ""
}

// confirmerToken mints the token q's confirmer header carries; "" for
// none.
func confirmerToken(t *testing.T, a *servicetest.Auth, q oracle.Request) string {
	switch q.Confirmer {
	case oracle.PlatformConfirmer:
		return a.Confirmer(t)
	case oracle.TenantConfirmerGroup:
		return a.User(t, "confirmer", q.Tenant, servicetest.ConfirmerGroup)
	case oracle.PlatformService:
		return a.Service(t)
	case oracle.InvalidConfirmerToken:
		return "not-a-token"
	}
	return ""
}

func describe(q oracle.Request) string {
	return fmt.Sprintf("principal %s/%s groups %v; tool %q gen %d digest %.20q plan epoch %d mode %v confirmer %d shown %.20q run %q class %q args %q",
		q.Tenant, q.Subject, q.Groups, q.ToolID, q.Generation, q.Digest, q.PlanEpoch, q.Mode, q.Confirmer, q.ShownDigest, q.RunID, q.Class, q.Arguments)
}

func describeState(s *oracle.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fresh=%v\n", s.Fresh)
	for _, tn := range slices.Sorted(maps.Keys(s.Tenants)) {
		t := s.Tenants[tn]
		fmt.Fprintf(&b, "tenant %s epoch %d kept %v\n", tn, t.Epoch, slices.Sorted(maps.Keys(t.Policies)))
		for _, e := range slices.Sorted(maps.Keys(t.Policies)) {
			p := t.Policies[e]
			fmt.Fprintf(&b, "  epoch %d grants %+v classes %v\n", e, p.Grants, p.Classes)
			for _, id := range slices.Sorted(maps.Keys(p.Tools)) {
				fmt.Fprintf(&b, "    %s %+v\n", id, p.Tools[id])
			}
		}
	}
	for k, p := range s.Pointers {
		fmt.Fprintf(&b, "pointer %s/%s %+v\n", k.Server, k.Class, *p)
	}
	for k, tools := range s.Generations {
		fmt.Fprintf(&b, "generation %s/%s/%d:", k.Server, k.Class, k.Generation)
		for _, id := range slices.Sorted(maps.Keys(tools)) {
			fmt.Fprintf(&b, " %s=%.14s", id, tools[id].Digest)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestRandomizedDecisionsAgreeWithOracle plays random registry and
// discovery states (tenants, grants over epochs with old ones kept or
// not, contracts and approvals per descriptor digest, enable and disable,
// generations with tools added, changed and removed, unversioned sources,
// closed servers and rollbacks, pointers past fresh_until, stale replicas)
// and random Checks (plan generations and epochs old, current and newer,
// modes, run ids, classes of the tenant and of another, arguments valid,
// invalid and malformed), and compares every reason with the independent
// oracle (package e2e/admissionoracle). One round in four goes through
// the real AdmissionService over gRPC (decision cache with Redis L2,
// receipts in Postgres), a world that evolves between steps as the Watch
// streams would deliver it (one step in five they have not delivered it
// yet: the replica, still fresh, decides from the heads it holds, and the
// oracle judges the same view); the rest through the decision package
// (admissiontest.Decider), each round a fresh state. A disagreement prints
// the seed (and TOOLCRIB_ADMISSION_SEED replays a decision round with its
// state). Counters: rounds, agree, cross-tenant hits, ALLOW from a stale
// replica, receipt coverage.
func TestRandomizedDecisionsAgreeWithOracle(t *testing.T) {
	rounds, base := ciRounds, uint64(time.Now().UnixNano())
	if testing.Short() {
		rounds /= 10
	}
	if v := os.Getenv(RoundsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", RoundsEnv, v)
		}
		rounds = n
	}
	if v := os.Getenv(SeedBaseEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a seed", SeedBaseEnv, v)
		}
		base = n
	}
	if v := os.Getenv(SeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q", SeedEnv, v)
		}
		replayDecision(t, n)
		return
	}
	t.Logf("%d rounds from seed %d (repeat with %s=%d %s=%d)", rounds, base, SeedBaseEnv, base, RoundsEnv, rounds)
	grpcRounds := rounds / grpcShare
	started := time.Now()
	var tl tally
	tl.decisionRounds(t, base, rounds-grpcRounds)
	tDecide := time.Since(started)
	// The gRPC share: worlds of up to 5,000 rounds each.
	for i, left := 0, grpcRounds; left > 0; i++ {
		n := min(left, 5000)
		tl.grpcRounds(t, base+uint64(rounds)+uint64(i), n)
		left -= n
	}
	t.Logf("%d rounds (%d decision package in %v, %d gRPC in %v): agree %d; reasons %v", tl.rounds.Load(),
		rounds-grpcRounds, tDecide.Round(time.Millisecond), grpcRounds, (time.Since(started) - tDecide).Round(time.Millisecond), tl.agree.Load(), tl.reasonCounts())
	faultreport.Add(t, faultreport.AdmissionRounds, tl.rounds.Load())
	faultreport.Add(t, faultreport.AdmissionAgree, tl.agree.Load())
	faultreport.Add(t, faultreport.AdmissionCrossTenantHits, tl.crossTenant.Load())
	faultreport.Add(t, faultreport.AdmissionAllowAfterWindow, tl.staleAllow.Load())
	if tl.agree.Load() != tl.rounds.Load() {
		t.Errorf("%d of %d rounds disagree with the oracle", tl.rounds.Load()-tl.agree.Load(), tl.rounds.Load())
	}
	if n := tl.reasons[catalogv1.DecisionReason_DECISION_REASON_ALLOW].Load(); n == 0 && rounds >= 1000 {
		t.Errorf("no round was ALLOW in %d rounds: the generator is too narrow", rounds)
	}
}

type tally struct {
	rounds, agree, crossTenant, staleAllow atomic.Int64
	reported                               atomic.Int64
	reasons                                [32]atomic.Int64
}

func (tl *tally) reasonCounts() map[string]int64 {
	out := map[string]int64{}
	for i := range tl.reasons {
		if n := tl.reasons[i].Load(); n > 0 {
			out[strings.TrimPrefix(catalogv1.DecisionReason(i).String(), "DECISION_REASON_")] = n
		}
	}
	return out
}

// judge counts one round; want lists the reasons the oracle accepts.
func (tl *tally) judge(t *testing.T, got oracle.Reason, detail string, want []oracle.Reason, q oracle.Request, fresh bool, what string) {
	tl.rounds.Add(1)
	if int(got) < len(tl.reasons) {
		tl.reasons[got].Add(1)
	}
	allow := got == catalogv1.DecisionReason_DECISION_REASON_ALLOW
	if allow && !fresh {
		tl.staleAllow.Add(1)
	}
	if allow && q.Class != "" && !strings.HasPrefix(q.Class, q.Tenant+".") {
		tl.crossTenant.Add(1)
	}
	if slices.Contains(want, got) {
		tl.agree.Add(1)
		return
	}
	if tl.reported.Add(1) <= 10 {
		t.Errorf("%s: admission %v (%q), oracle %v\n  %s", what, got, detail, want, describe(q))
	}
}

func (tl *tally) decisionRounds(t *testing.T, base uint64, n int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := admissiontest.NewDecider()
			for {
				i := next.Add(1) - 1
				if int(i) >= n || tl.reported.Load() > 10 {
					return
				}
				seed := base + uint64(i)
				got, detail, want, q, s := decisionRound(d, seed)
				tl.judge(t, got, detail, []oracle.Reason{want}, q, s.Fresh, fmt.Sprintf("seed %d (replay: %s=%d)", seed, SeedEnv, seed))
			}
		}()
	}
	wg.Wait()
}

// decisionRound plays one round through the decision package.
func decisionRound(d *admissiontest.Decider, seed uint64) (got oracle.Reason, detail string, want oracle.Reason, q oracle.Request, s *oracle.State) {
	now := time.Now()
	g := newGen(seed, now)
	s = g.state()
	for range g.r.IntN(4) {
		g.evolve(s)
	}
	q = g.request(s)
	want = oracle.Decide(s, q)
	got, detail = d.DecideConfirmed(worldOf(s), now, principal.Principal{Subject: q.Subject, Tenant: q.Tenant, Groups: q.Groups}, confirmerSubject(q), checkRequest(q))
	return got, detail, want, q, s
}

func replayDecision(t *testing.T, seed uint64) {
	got, detail, want, q, s := decisionRound(admissiontest.NewDecider(), seed)
	t.Logf("state:\n%s\nrequest: %s\nadmission: %v (%s)\noracle: %v", describeState(s), describe(q), got, detail, want)
	if got != want {
		t.Fatalf("seed %d disagrees", seed)
	}
}

// grpcRounds plays n rounds through the real service over one evolving
// world: steps of eight Checks, a change between steps.
func (tl *tally) grpcRounds(t *testing.T, seed uint64, n int) {
	now := time.Now()
	g := newGen(seed, now)
	s := g.state()
	w := worldOf(s)
	svc := admissiontest.StartWorld(t, admissiontest.Options{Redis: true}, w)
	conn := servicetest.Dial(t, svc.Addr, "")
	c := admissionv1.NewAdmissionServiceClient(conn)
	tokens := map[string]grpc.CallOption{}
	token := func(q oracle.Request) grpc.CallOption {
		k := q.Tenant + "/" + q.Subject + "/" + strings.Join(q.Groups, ",") + fmt.Sprint("/", q.Confirmer)
		if o, ok := tokens[k]; ok {
			return o
		}
		var creds credentials.PerRPCCredentials = principal.BearerToken(svc.Auth.User(t, q.Subject, q.Tenant, q.Groups...))
		if q.Confirmer != oracle.NoConfirmer {
			creds = principal.Beside(creds, principal.ConfirmerToken(confirmerToken(t, svc.Auth, q)))
		}
		o := grpc.PerRPCCredentials(creds)
		tokens[k] = o
		return o
	}
	ctx := context.Background()
	var ids []string
	synced := snapshot(s)
	lags := 0
	for step, done := 0, 0; done < n; step++ {
		if step > 0 {
			for range 1 + g.r.IntN(2) {
				g.evolve(s)
			}
			g.rev++
			w.Update(func() { fillWorld(w, s, g.rev+1) })
			// One step in five the Watch streams have not delivered the
			// change yet (the replica still fresh): it decides from the
			// heads it has, reading what they name from the sources.
			// (A pointer the heads have never held is read from the source
			// and then kept: such a step always syncs.)
			if chance(g.r, 0.8) || len(s.Pointers) != len(synced.Pointers) {
				svc.Sync()
				synced = snapshot(s)
			} else {
				lags++
			}
		}
		view := lagging(synced, s)
		for i := 0; i < 8 && done < n; i++ {
			done++
			q := g.request(s)
			view.Now = time.Now()
			before := oracle.Decide(view, q)
			resp, err := c.Check(ctx, checkRequest(q), token(q))
			if err != nil {
				t.Fatalf("world seed %d step %d: Check: %v\n  %s", seed, step, err, describe(q))
			}
			view.Now = time.Now()
			after := oracle.Decide(view, q)
			ids = append(ids, resp.GetReceipt().GetReceiptId())
			if resp.GetReason() == catalogv1.DecisionReason_DECISION_REASON_ALLOW {
				if cl := resp.GetReceipt().GetAudienceClass(); !strings.HasPrefix(cl, q.Tenant+".") {
					tl.crossTenant.Add(1)
				}
			}
			tl.judge(t, resp.GetReason(), resp.GetDetail(), []oracle.Reason{before, after}, q, s.Fresh,
				fmt.Sprintf("gRPC world seed %d step %d (%s=%d %s=%d replays the run)", seed, step, SeedBaseEnv, seed, RoundsEnv, n))
		}
	}
	t.Logf("gRPC world seed %d: %d rounds, %d steps with the replica's heads behind the sources", seed, n, lags)
	tl.receipts(t, svc.PostgresURL, ids)
}

// snapshot copies what a replica's heads hold of s (epochs, pointers);
// policies and generations are immutable once written and are shared.
func snapshot(s *oracle.State) *oracle.State {
	v := *s
	v.Tenants = map[string]*oracle.Tenant{}
	for name, tn := range s.Tenants {
		c := *tn
		c.Policies = maps.Clone(tn.Policies)
		v.Tenants[name] = &c
	}
	v.Pointers = maps.Clone(s.Pointers)
	return &v
}

// lagging is the view of a replica whose heads are synced while the
// sources hold s: the synced epochs and pointers, a pointer the heads do
// not hold yet read from the source, every generation readable, and the
// freshness of now.
func lagging(synced, s *oracle.State) *oracle.State {
	v := *synced
	v.Pointers = maps.Clone(synced.Pointers)
	for k, p := range s.Pointers {
		if _, ok := v.Pointers[k]; !ok {
			v.Pointers[k] = p
		}
	}
	v.Generations, v.Fresh = s.Generations, s.Fresh
	return &v
}

// receipts waits until every receipt the service answered with is stored
// and records the coverage.
func (tl *tally) receipts(t *testing.T, url string, ids []string) {
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var stored int64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM admission.receipts WHERE receipt_id::text = ANY($1)`, ids).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored == int64(len(ids)) || time.Now().After(deadline) {
			break
		}
	}
	faultreport.Add(t, faultreport.AdmissionChecksAnswered, int64(len(ids)))
	faultreport.Add(t, faultreport.AdmissionReceiptsStored, stored)
	if stored != int64(len(ids)) {
		t.Errorf("%d of %d acknowledged receipts stored", stored, len(ids))
	}
}
