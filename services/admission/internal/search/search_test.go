package search

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
)

func tool(server, name, desc string, effect catalogv1.EffectClass) Tool {
	return Tool{ToolID: server + "." + name, ServerID: server, Name: name, Description: desc,
		InputSchema: []byte(`{"type":"object"}`), AudienceClass: "t.readers", Generation: 1,
		DescriptorDigest: "sha256:" + strings.Repeat("a", 64), Effect: effect,
		SourceState: catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE}
}

const (
	ro = catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY
	wr = catalogv1.EffectClass_EFFECT_CLASS_WRITE
)

func names(r Result) []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.GetModel().GetName())
	}
	return out
}

func TestModelNamesOnlyDisambiguatedOnCollision(t *testing.T) {
	s := Build([]Tool{
		tool("shipping", "status", "", ro), tool("billing", "status", "", ro), tool("billing", "refund", "", wr),
	})
	got := names(s.Select(Filters{}))
	want := []string{"billing__status", "refund", "shipping__status"}
	if !slices.Equal(got, want) {
		t.Fatalf("names %v, want %v", got, want)
	}
	r := s.Select(Filters{}).Tools[0]
	if r.GetRuntime().GetToolId() != "billing.status" || r.GetRuntime().GetServerId() != "billing" {
		t.Fatalf("runtime view %v", r.GetRuntime())
	}
}

func TestSameToolThroughTwoClassesOnce(t *testing.T) {
	a, b := tool("srv", "x", "", ro), tool("srv", "x", "", ro)
	a.AudienceClass, b.AudienceClass = "t.zeta", "t.alpha"
	s := Build([]Tool{a, b})
	r := s.Select(Filters{})
	if len(r.Tools) != 1 || r.Tools[0].GetRuntime().GetAudienceClass() != "t.alpha" || names(r)[0] != "x" {
		t.Fatalf("%v", r.Tools)
	}
}

func TestFiltersAndTruncation(t *testing.T) {
	var tools []Tool
	for i := range 10 {
		e := ro
		if i%2 == 1 {
			e = wr
		}
		tools = append(tools, tool("srv", fmt.Sprintf("t%02d", i), strings.Repeat("d", 10), e))
	}
	s := Build(tools)
	if r := s.Select(Filters{Effects: []catalogv1.EffectClass{wr}}); len(r.Tools) != 5 || r.Truncated || r.Count != 10 {
		t.Fatalf("effects: %v %v", names(r), r.Truncated)
	}
	if r := s.Select(Filters{MaxTools: 3}); !slices.Equal(names(r), []string{"t00", "t01", "t02"}) || !r.Truncated {
		t.Fatalf("max tools: %v %v", names(r), r.Truncated)
	}
	// Each tool is 10 + 17 bytes: a 60-byte budget takes two.
	if r := s.Select(Filters{MaxBytes: 60}); len(r.Tools) != 2 || !r.Truncated {
		t.Fatalf("budget: %v %v", names(r), r.Truncated)
	}
	if r := s.Select(Filters{MaxTools: 10}); r.Truncated {
		t.Fatal("exactly the limit is not truncated")
	}
}

func TestDigestTracksTheVisibleSet(t *testing.T) {
	base := []Tool{tool("a", "x", "", ro), tool("b", "y", "", wr)}
	d0 := Build(base).Digest()
	shuffled := []Tool{base[1], base[0]}
	if Build(shuffled).Digest() != d0 {
		t.Fatal("digest depends on input order")
	}
	changes := []func([]Tool){
		func(ts []Tool) { ts[0].Generation = 2 },
		func(ts []Tool) { ts[0].DescriptorDigest = "sha256:" + strings.Repeat("b", 64) },
		func(ts []Tool) { ts[0].Effect = wr },
		func(ts []Tool) { ts[0].SourceState = catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION },
		func(ts []Tool) { ts[0].ConfirmationRequired = true },
		func(ts []Tool) { ts[1].Name = "x"; ts[1].ToolID = "b.x" }, // a collision renames both
	}
	for i, ch := range changes {
		ts := slices.Clone(base)
		ch(ts)
		if Build(ts).Digest() == d0 {
			t.Errorf("change %d kept the digest", i)
		}
	}
	if Build(base[:1]).Digest() == d0 {
		t.Error("a removed tool kept the digest")
	}
}

func TestQueryRanksAndFilters(t *testing.T) {
	s := Build([]Tool{
		tool("ship", "get_shipment", "Return the delivery state of a shipment.", ro),
		tool("ship", "list_carriers", "List carriers.", ro),
		tool("bill", "create_invoice", "Create an invoice for a customer.", wr),
	})
	r := s.Select(Filters{Query: "Shipments delivery"})
	if !slices.Equal(names(r), []string{"get_shipment"}) {
		t.Fatalf("query: %v", names(r))
	}
	if r := s.Select(Filters{Query: "nothing matches zzz"}); len(r.Tools) != 0 || r.Count != 3 {
		t.Fatalf("no match: %v", names(r))
	}
	// camelCase and snake_case names are split.
	if got := Tokenize("getShipmentStatus list_carriers HTTP2-Thing"); !slices.Equal(got, []string{"get", "shipment", "statu", "list", "carrier", "http2", "thing"}) &&
		!slices.Equal(got, []string{"get", "shipment", "status", "list", "carrier", "http2", "thing"}) {
		t.Fatalf("tokens %v", got)
	}
	if got := Tokenize("getHTTPServer XMLHttpRequest listMCPTools ABC"); !slices.Equal(got, []string{"get", "http", "server", "xml", "http", "request", "list", "mcp", "tool", "abc"}) {
		t.Fatalf("acronyms: tokens %v", got)
	}
	// Function words are dropped; question words and negation are kept.
	if got := Tokenize("Where is my parcel? Not the invoice, who has it"); !slices.Equal(got, []string{"where", "parcel", "not", "invoice", "who"}) {
		t.Fatalf("tokens %v", got)
	}
	if r := s.Select(Filters{Query: "the of a"}); len(r.Tools) != 0 {
		t.Fatalf("a query of function words only matched %v", names(r))
	}
}

type query struct{ target, text string }

func loadQueries(t testing.TB) []query {
	f, err := os.Open("testdata/queries.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var qs []query
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		target, text, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("bad line %q", line)
		}
		qs = append(qs, query{target, text})
	}
	return qs
}

// recallFloor is the measured recall@5 less a margin: the test fails when a
// change to tokenising or ranking makes search worse.
const recallFloor = 0.35

// TestRecallAt5 measures tool search on the 5,000-tool corpus with the
// committed query set and prints the benchmark line.
func TestRecallAt5(t *testing.T) {
	tools := corpus()
	if len(tools) != 5000 {
		t.Fatalf("%d tools", len(tools))
	}
	s := Build(tools)
	ids := map[string]bool{}
	for _, tl := range tools {
		ids[tl.ToolID] = true
	}
	qs := loadQueries(t)
	hits := 0
	var lat []time.Duration
	var misses []string
	for _, q := range qs {
		if !ids[q.target] {
			t.Fatalf("query target %s is not in the corpus", q.target)
		}
		if strings.Contains(strings.ToLower(descriptionOf(tools, q.target)), strings.ToLower(q.text)) {
			t.Fatalf("query %q is copied from its target's description", q.text)
		}
		start := time.Now()
		r := s.Select(Filters{Query: q.text, MaxTools: 5})
		lat = append(lat, time.Since(start))
		found := false
		for _, vt := range r.Tools {
			if vt.GetRuntime().GetToolId() == q.target {
				found = true
			}
		}
		if found {
			hits++
		} else {
			misses = append(misses, q.target+" ← "+q.text)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p99 := lat[(len(lat)*99+99)/100-1]
	recall := float64(hits) / float64(len(qs))
	fmt.Printf("search: tools=%d queries=%d recall_at_5=%.3f p99_ms=%.3f\n", len(tools), len(qs), recall, float64(p99.Microseconds())/1000)
	if testing.Verbose() {
		for _, m := range misses {
			t.Logf("miss: %s", m)
		}
	}
	if recall < recallFloor {
		t.Fatalf("recall@5 %.3f below the floor %.2f", recall, recallFloor)
	}
}

func descriptionOf(tools []Tool, id string) string {
	for _, t := range tools {
		if t.ToolID == id {
			return t.Description
		}
	}
	return ""
}

func BenchmarkBuild5000(b *testing.B) {
	tools := corpus()
	for b.Loop() {
		Build(tools)
	}
}

func BenchmarkQuery5000(b *testing.B) {
	s := Build(corpus())
	for b.Loop() {
		s.Select(Filters{Query: "where is my package right now", MaxTools: 5})
	}
}
