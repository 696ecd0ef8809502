// Package scenario generates random discovery scenarios for the randomized
// fault suite: from a seed, a fixture [fixture.Script] (catalog, page sizes,
// revisions present or absent, tools added, removed and changed between
// and during pages, notifications at random points, cursor and revision
// faults, errors, crashes, content faults, cache hints) and the
// [oracle.Config] (registered revision source, caps) to judge it with.
//
// A Scenario is plain data and fully determined by its seed, so a
// disagreement between crawler and oracle is replayed by its seed alone:
//
//	sc := scenario.Generate(seed)
//	s, _ := fixture.New(sc.Script, nil)
//	// register the server with sc.Config.RevisionSource, give the crawler
//	// sc.Config.Limits, reach it over sc.Transport, crawl, then:
//	want, err := oracle.Expect(s.Log().Since(mark), sc.Config)
//
// The generator avoids only what no crawler could catch: a versioned
// server ending its list early (a missing `nextCursor`, or before
// 2026-07-28 an empty one) would make a partial catalog look whole.
package scenario

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/oracle"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Transports a scenario may suggest.
const (
	TransportInMemory = "in-memory"
	TransportHTTP     = "http"
)

// HTTPShare is the share of scenarios that suggest streamable HTTP.
const HTTPShare = 8 // one in eight

// DefaultLimits are the caps of a scenario that does not tighten one.
var DefaultLimits = oracle.Limits{
	MaxPages:       1000,
	MaxTools:       10_000,
	MaxBytes:       16 << 20,
	MaxSchemaBytes: 64 << 10,
	MaxToolBytes:   128 << 10,
	MaxSchemaDepth: 32,
}

// Scenario is one round of the randomized fault suite.
type Scenario struct {
	// Seed generated the scenario.
	Seed uint64
	// Script is what the fixture replays.
	Script fixture.Script
	// Config is how the server is registered and the caps the crawler
	// must use; the oracle judges with it.
	Config oracle.Config
	// Transport is how to reach the fixture: [TransportInMemory] or
	// [TransportHTTP].
	Transport string
	// Features names what the generator put in, for failure messages.
	Features []string
}

// String summarizes the scenario, seed first.
func (s Scenario) String() string {
	return fmt.Sprintf("seed=%d version=%s versioned=%v source=%s transport=%s tools=%d page=%d [%s]",
		s.Seed, s.Script.ProtocolVersion, s.Script.Versioned, s.Config.RevisionSource, s.Transport,
		len(s.Script.Tools), s.Script.PageSize, strings.Join(s.Features, " "))
}

type gen struct {
	rng      *rand.Rand
	sc       Scenario
	modern   bool
	pages    int // pages of the initial catalog
	nextName int
}

func (g *gen) chance(percent int) bool { return g.rng.IntN(100) < percent }

// between returns a number in [lo, hi].
func (g *gen) between(lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + g.rng.IntN(hi-lo+1)
}

func (g *gen) feature(format string, args ...any) {
	g.sc.Features = append(g.sc.Features, fmt.Sprintf(format, args...))
}

var words = []string{"reads", "writes", "lists", "reserves", "cancels", "exports", "stock", "orders",
	"shipments", "invoices", "for", "a", "customer", "region", "quickly", "safely"}

func (g *gen) tool() fixture.Tool {
	g.nextName++
	n := g.between(2, 6)
	desc := make([]string, n)
	for i := range desc {
		desc[i] = words[g.rng.IntN(len(words))]
	}
	return fixture.NewTool(fmt.Sprintf("tool_%03d", g.nextName), strings.Join(desc, " "))
}

// Generate returns the scenario of seed.
func Generate(seed uint64) Scenario {
	g := &gen{rng: rand.New(rand.NewPCG(seed, 0x7363656e6172696f)), sc: Scenario{Seed: seed}}
	sc := &g.sc.Script
	sc.ProtocolVersion = fixture.Versions[g.rng.IntN(len(fixture.Versions))]
	g.modern = sc.ProtocolVersion >= fixture.Version20260728
	sc.Versioned = g.chance(80)
	switch {
	case sc.Versioned && g.chance(90), !sc.Versioned && !g.chance(90):
		g.sc.Config.RevisionSource = registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED
	default:
		g.sc.Config.RevisionSource = registryv1.RevisionSource_REVISION_SOURCE_NONE
	}
	if sc.Versioned && g.chance(50) {
		sc.StaleCursor = fixture.StaleCursorServe
	}
	sc.PageSize = g.between(1, 6)
	for range g.between(0, 24) {
		sc.Tools = append(sc.Tools, g.tool())
	}
	g.pages = max(1, (len(sc.Tools)+sc.PageSize-1)/sc.PageSize)
	if len(sc.Tools) > 0 && g.chance(15) {
		g.contentFault()
	}
	g.sc.Config.Limits = DefaultLimits
	g.steps()
	g.cache()
	g.limits()
	g.sc.Transport = TransportInMemory
	if g.rng.IntN(HTTPShare) == 0 {
		g.sc.Transport = TransportHTTP
	}
	return g.sc
}

// contentFault replaces one tool with one that breaks a validation rule.
func (g *gen) contentFault() {
	sc := &g.sc.Script
	i := g.rng.IntN(len(sc.Tools))
	name := sc.Tools[i].Name()
	faults := []struct {
		name string
		tool func() fixture.Tool
	}{
		{"invalid-name", func() fixture.Tool {
			return fixture.NewTool(fixture.InvalidToolNames[g.rng.IntN(len(fixture.InvalidToolNames))], "bad name")
		}},
		{"unknown-dialect", func() fixture.Tool {
			return fixture.ToolWithDialect(name, "https://json-schema.org/draft/2019-09/schema")
		}},
		{"network-ref", func() fixture.Tool { return fixture.ToolWithRef(name, "https://schemas.invalid/x.json") }},
		{"unresolved-ref", func() fixture.Tool { return fixture.ToolWithRef(name, "#/$defs/missing") }},
		{"deep-schema", func() fixture.Tool { return fixture.ToolWithDeepSchema(name, 20) }},
		{"http-icon", func() fixture.Tool { return fixture.ToolWithIcon(name, "http://icons.invalid/x.png") }},
		{"malformed", func() fixture.Tool { return fixture.MustRawTool(`["not","a","tool"]`) }},
		{"no-input-schema", func() fixture.Tool { return fixture.MustRawTool(`{"name":"` + name + `"}`) }},
		{"instructions", func() fixture.Tool { return fixture.ToolWithInstructions(name) }},
	}
	if g.chance(100 / (len(faults) + 1)) {
		// Another tool of the same name, with another schema.
		dup := fixture.DuplicateTools(name)[1]
		at := g.between(0, len(sc.Tools))
		sc.Tools = append(sc.Tools[:at:at], append([]fixture.Tool{dup}, sc.Tools[at:]...)...)
		g.feature("content:duplicate@%d", at)
		return
	}
	f := faults[g.rng.IntN(len(faults))]
	sc.Tools[i] = f.tool()
	g.feature("content:%s@%d", f.name, i)
}

func (g *gen) steps() {
	sc := &g.sc.Script
	recheck := g.pages + 1
	add := func(s fixture.Step) { sc.Steps = append(sc.Steps, s) }
	if g.chance(30) {
		for range g.between(1, 2) {
			r := g.between(1, recheck)
			add(fixture.Step{Request: r, Mutate: []fixture.Mutation{g.mutation()}})
			g.feature("mutate@%d", r)
		}
	}
	if g.chance(15) {
		sc.NotifyOnChange = true
		g.feature("notify-on-change")
	}
	if g.chance(15) {
		r := g.between(1, recheck+1) // recheck+1: late, after the scan
		add(fixture.Step{Request: r, Notify: true})
		g.feature("notify@%d", r)
	}
	if g.chance(20) {
		g.cursorFault()
	}
	if g.chance(10) {
		r := g.between(1, recheck)
		add(fixture.Step{Request: r, OmitRevision: true})
		g.feature("omit-revision@%d", r)
	}
	if g.chance(10) {
		r := g.between(1, recheck)
		add(fixture.Step{Request: r, Revision: fmt.Sprintf("forged-%d", g.rng.IntN(1000))})
		g.feature("forge-revision@%d", r)
	}
	if g.chance(5) {
		r := g.between(1, recheck)
		add(fixture.Step{Request: r, Error: &fixture.RPCError{Code: -32603, Message: "injected"}})
		g.feature("error@%d", r)
	}
	if g.chance(3) {
		r := g.between(1, recheck)
		add(fixture.Step{Request: r, Crash: true})
		g.feature("crash@%d", r)
	}
	if g.chance(10) {
		r := g.between(1, g.pages)
		size := g.between(1, 8)
		add(fixture.Step{Request: r, PageSize: size})
		g.feature("page-size@%d=%d", r, size)
	}
}

func (g *gen) mutation() fixture.Mutation {
	tools := g.sc.Script.Tools
	existing := func() string {
		if len(tools) == 0 {
			return "tool_000"
		}
		return tools[g.rng.IntN(len(tools))].Name()
	}
	switch g.rng.IntN(4) {
	case 0: // a new tool anywhere, possibly before the cursor
		return fixture.Insert(g.between(0, len(tools)), g.tool())
	case 1: // a changed description
		return fixture.Upsert(fixture.NewTool(existing(), fmt.Sprintf("changed %d", g.rng.IntN(1000))))
	case 2:
		return fixture.Remove(existing())
	default: // revision moves, tools do not
		return fixture.Touch()
	}
}

// cursorFault adds one rewritten nextCursor at a walk page, leaving out
// what would end a versioned list early.
func (g *gen) cursorFault() {
	r := g.between(1, g.pages)
	var kinds []fixture.CursorFault
	if r >= 2 || g.modern {
		kinds = append(kinds, fixture.CursorRepeat)
	}
	if r >= 3 || (r >= 2 && g.modern) {
		kinds = append(kinds, fixture.CursorCycle)
	}
	if g.modern {
		kinds = append(kinds, fixture.CursorEmpty)
	}
	kinds = append(kinds, fixture.CursorForge)
	k := kinds[g.rng.IntN(len(kinds))]
	s := fixture.Step{Request: r, Cursor: k}
	if k == fixture.CursorCycle {
		lo := 2
		if g.modern {
			lo = 1
		}
		s.CycleTo = g.between(lo, r-1)
	}
	g.sc.Script.Steps = append(g.sc.Script.Steps, s)
	g.feature("cursor-%s@%d", k, r)
}

func (g *gen) cache() {
	if !g.modern || !g.chance(30) {
		return
	}
	h := &fixture.CacheHint{Scope: "public"}
	if g.chance(50) {
		h.Scope = "private"
	}
	if g.chance(20) {
		h.TTLMs = 60_000 // a client that caches would skip the re-check
	}
	g.sc.Script.Cache = h
	g.feature("cache:%s/%d", h.Scope, h.TTLMs)
}

func (g *gen) limits() {
	lim := &g.sc.Config.Limits
	n := len(g.sc.Script.Tools)
	if g.chance(12) {
		lim.MaxPages = max(1, g.between(g.pages-1, g.pages+1))
		g.feature("max-pages=%d", lim.MaxPages)
	}
	if g.chance(12) {
		lim.MaxTools = max(1, g.between(n-2, n+1))
		g.feature("max-tools=%d", lim.MaxTools)
	}
	if g.chance(8) {
		size := 0
		for _, t := range g.sc.Script.Tools {
			size += len(t.JSON()) + 1
		}
		size += 120 * g.pages // result envelope: _meta, nextCursor
		lim.MaxBytes = int64(max(1, size*g.between(60, 140)/100))
		g.feature("max-bytes=%d", lim.MaxBytes)
	}
}
