package decision

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

var (
	toolIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}\.[A-Za-z0-9_.-]{1,128}$`)
	classPattern  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}\.[a-z0-9][a-z0-9_-]{0,62}$`)
	runIDPattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)
)

type shape struct {
	name    string
	pattern *regexp.Regexp
	valid   func(string) bool
}

var shapes = []shape{{"tool id", toolIDPattern, validToolID}, {"class", classPattern, validClass}, {"run id", runIDPattern, validRunID}}

// idSample draws strings near the shapes' borders: lengths around 63, 64,
// 128 and 129, bytes from every class the patterns name and a few they do
// not, dots anywhere.
func idSample(r *rand.Rand) string {
	const alphabet = "az09AZ_-.:/ \n\x00\xc3\xa9Z."
	n := []int{0, 1, 2, 3, 62, 63, 64, 65, 127, 128, 129, 130, 192, 193}[r.IntN(14)] + r.IntN(3)
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

// TestIDShapesMatchTheirPatterns holds the hand-written matchers to the
// patterns they replace, on examples and on 200,000 strings drawn near the
// borders.
func TestIDShapesMatchTheirPatterns(t *testing.T) {
	examples := []string{"logistics.shipment_status", "a.b", "demo-a.readers", "run-1", "a..b", ".a", "a.", "A.b",
		"a_b.c", "tenant.Class", "tenant.cl.ass", "x", "", "é.b", "a.b\n", "run:1.2_3-4"}
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

func FuzzIDShapes(f *testing.F) {
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
