package ids

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

type shape struct {
	name    string
	pattern *regexp.Regexp
	valid   func(string) bool
}

func anchored(p string) *regexp.Regexp { return regexp.MustCompile(`^(?:` + p + `)$`) }

var shapes = []shape{
	{"server id", anchored(ServerIDPattern), ValidServerID},
	{"tenant id", anchored(TenantIDPattern), ValidTenantID},
	{"class", anchored(ClassPattern), ValidClass},
	{"tool name", anchored(ToolNamePattern), ValidToolName},
	{"tool id", anchored(ToolIDPattern), ValidToolID},
	{"run id", anchored(RunIDPattern), ValidRunID},
	{"scope", anchored(ScopePattern), ValidScope},
}

// idSample draws strings near the shapes' borders: lengths around 63, 64,
// 127, 128, 129 and 192, bytes from every class the patterns name and a
// few they do not, dots anywhere.
func idSample(r *rand.Rand) string {
	const alphabet = "az09AZ_-.:/*+ \n\x00\xc3\xa9Z."
	n := []int{0, 1, 2, 3, 62, 63, 64, 65, 126, 127, 128, 129, 130, 191, 192, 193}[r.IntN(16)] + r.IntN(3)
	b := make([]byte, n)
	for i := range b {
		if r.IntN(3) == 0 {
			b[i] = "abcxyz0189"[r.IntN(10)]
		} else {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
	}
	if n > 2 && r.IntN(2) == 0 { // one dot at a border position
		b[[]int{1, 62, 63, 64, n - 1, n / 2}[r.IntN(6)]%n] = '.'
	}
	return string(b)
}

// TestShapesMatchTheirPatterns holds the hand-written matchers to the
// patterns they stand for, on examples and on 200,000 strings drawn near
// the borders.
func TestShapesMatchTheirPatterns(t *testing.T) {
	examples := []string{"logistics.shipment_status", "a.b", "demo-a.readers", "run-1", "a..b", ".a", "a.", "A.b",
		"a_b.c", "tenant.Class", "tenant.cl.ass", "x", "", "é.b", "a.b\n", "run:1.2_3-4", "shipment:read", "a/b*"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200_000 {
		s := ""
		if i < len(examples) {
			s = examples[i]
		} else {
			s = idSample(r)
		}
		for _, sh := range shapes {
			if got, want := sh.valid(s), sh.pattern.MatchString(s); got != want {
				t.Fatalf("%s %q: matcher %v, pattern %v", sh.name, s, got, want)
			}
		}
	}
}

func FuzzShapes(f *testing.F) {
	f.Add("logistics.shipment_status")
	f.Add("demo-a.readers")
	f.Fuzz(func(t *testing.T, s string) {
		for _, sh := range shapes {
			if got, want := sh.valid(s), sh.pattern.MatchString(s); got != want {
				t.Fatalf("%s %q: matcher %v, pattern %v", sh.name, s, got, want)
			}
		}
	})
}

// TestGrammarBoundaries pins each rule at its edges: every character class
// first and later, the longest id and one byte over.
func TestGrammarBoundaries(t *testing.T) {
	x := strings.Repeat
	cases := []struct {
		name  string
		valid func(string) bool
		in    string
		want  bool
	}{
		{"server: lowercase", ValidServerID, "logistics", true},
		{"server: digit first", ValidServerID, "0ps", true},
		{"server: _ and - after the first", ValidServerID, "a_b-c", true},
		{"server: _ first", ValidServerID, "_a", false},
		{"server: - first", ValidServerID, "-a", false},
		{"server: uppercase", ValidServerID, "Logistics", false},
		{"server: dot", ValidServerID, "a.b", false},
		{"server: empty", ValidServerID, "", false},
		{"server: 63 bytes", ValidServerID, x("a", 63), true},
		{"server: 64 bytes", ValidServerID, x("a", 64), false},

		{"tenant: - after the first", ValidTenantID, "tenant-a", true},
		{"tenant: _", ValidTenantID, "tenant_a", false},
		{"tenant: dot", ValidTenantID, "tenant.a", false},
		{"tenant: uppercase", ValidTenantID, "Tenant", false},
		{"tenant: - first", ValidTenantID, "-tenant", false},
		{"tenant: 63 bytes", ValidTenantID, x("t", 63), true},
		{"tenant: 64 bytes", ValidTenantID, x("t", 64), false},

		{"class: tenant.class", ValidClass, "tenant-a.readers", true},
		{"class: _ and - in the class part", ValidClass, "tenant-a.read_ers-2", true},
		// Discovery once accepted these two; the registry never stored them.
		{"class: _ in the tenant part", ValidClass, "tenant_a.readers", false},
		{"class: dot in the class part", ValidClass, "tenant-a.read.ers", false},
		{"class: no dot", ValidClass, "tenant-a", false},
		{"class: empty class part", ValidClass, "tenant-a.", false},
		{"class: empty tenant part", ValidClass, ".readers", false},
		{"class: _ first in the class part", ValidClass, "t._readers", false},
		{"class: uppercase class part", ValidClass, "t.Readers", false},
		{"class: 63.63 bytes", ValidClass, x("t", 63) + "." + x("c", 63), true},
		{"class: 64-byte tenant", ValidClass, x("t", 64) + "." + x("c", 63), false},
		{"class: 64-byte class part", ValidClass, x("t", 63) + "." + x("c", 64), false},

		{"tool name: every class", ValidToolName, "Get_shipment.v2-beta", true},
		{"tool name: dot or _ first", ValidToolName, "._x", true},
		{"tool name: colon", ValidToolName, "a:b", false},
		{"tool name: space", ValidToolName, "a b", false},
		{"tool name: 128 bytes", ValidToolName, x("N", 128), true},
		{"tool name: 129 bytes", ValidToolName, x("N", 129), false},

		{"tool id: server.name", ValidToolID, "logistics.shipment_status", true},
		{"tool id: dots in the name", ValidToolID, "logistics.a.b", true},
		{"tool id: no dot", ValidToolID, "logistics", false},
		{"tool id: bad server", ValidToolID, "Logistics.x", false},
		{"tool id: empty name", ValidToolID, "logistics.", false},
		{"tool id: longest", ValidToolID, x("s", 63) + "." + x("N", 128), true},
		{"tool id: 64-byte server", ValidToolID, x("s", 64) + "." + x("N", 128), false},
		{"tool id: 129-byte name", ValidToolID, x("s", 63) + "." + x("N", 129), false},

		{"run id: every class", ValidRunID, "Run-1_2.3:4", true},
		{"run id: uppercase first", ValidRunID, "R", true},
		{"run id: _ first", ValidRunID, "_r", false},
		{"run id: : first", ValidRunID, ":r", false},
		{"run id: slash", ValidRunID, "r/1", false},
		{"run id: empty", ValidRunID, "", false},
		{"run id: 128 bytes", ValidRunID, x("r", 128), true},
		{"run id: 129 bytes", ValidRunID, x("r", 129), false},

		{"scope: colon", ValidScope, "shipment:read", true},
		{"scope: slash and star", ValidScope, "files/*", true},
		{"scope: star first", ValidScope, "*", false},
		{"scope: space", ValidScope, "a b", false},
		{"scope: 128 bytes", ValidScope, x("s", 128), true},
		{"scope: 129 bytes", ValidScope, x("s", 129), false},

		{"name: any printable", ValidName, "alice@example.test", true},
		{"name: non-ASCII letter", ValidName, "zoë", true},
		{"name: empty", ValidName, "", false},
		{"name: space", ValidName, "a b", false},
		{"name: no-break space", ValidName, "a\u00a0b", false},
		{"name: control", ValidName, "a\x1bb", false},
		{"name: 256 bytes", ValidName, x("n", 256), true},
		{"name: 257 bytes", ValidName, x("n", 257), false},
	}
	for _, c := range cases {
		if got := c.valid(c.in); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if MaxClassBytes != 127 || MaxToolIDBytes != 192 {
		t.Errorf("MaxClassBytes %d, MaxToolIDBytes %d; want 127 and 192", MaxClassBytes, MaxToolIDBytes)
	}
}

func TestSplitToolIDAndTenantOfClass(t *testing.T) {
	if s, n, ok := SplitToolID("logistics.a.b"); !ok || s != "logistics" || n != "a.b" {
		t.Errorf("SplitToolID: %q %q %v", s, n, ok)
	}
	if s, n, ok := SplitToolID("Logistics.a"); ok || s != "" || n != "" {
		t.Errorf("SplitToolID of a bad id: %q %q %v", s, n, ok)
	}
	if got := ToolID("logistics", "a.b"); got != "logistics.a.b" {
		t.Errorf("ToolID: %q", got)
	}
	if got := TenantOfClass("tenant-a.readers"); got != "tenant-a" {
		t.Errorf("TenantOfClass: %q", got)
	}
}

func TestNameProblemNeverEchoes(t *testing.T) {
	for _, s := range []string{"a b", strings.Repeat("secret", 50), ""} {
		p := NameProblem(s)
		if p == "" || (s != "" && strings.Contains(p, s)) {
			t.Errorf("NameProblem(%.20q) = %q", s, p)
		}
	}
}
