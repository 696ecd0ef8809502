package search

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
)

// Tool is one tool the principal may call now.
type Tool struct {
	ToolID, ServerID, Name, Title, Description string
	InputSchema                                []byte
	AudienceClass                              string
	Generation                                 int64
	DescriptorDigest                           string
	Effect                                     catalogv1.EffectClass
	SourceState                                catalogv1.DiscoveryState
	ConfirmationRequired                       bool
	// Conditional: only grants with a condition give the tool
	// (RuntimeTool.conditional).
	Conditional bool
}

// Filters narrow one request.
type Filters struct {
	// Effects keeps only these classes; empty keeps all.
	Effects []catalogv1.EffectClass
	// Query ranks by BM25 and keeps only matching tools; empty for none.
	Query string
	// MaxBytes caps the total of descriptions and input schemas; 0 for none.
	MaxBytes int64
	// MaxTools caps the count; 0 for none.
	MaxTools int
}

// MaxQueryBytes is the longest query accepted.
const MaxQueryBytes = 1024

// Result is one answer.
type Result struct {
	Tools     []*admissionv1.VisibleTool
	Truncated bool
	// Digest and Count describe the whole visible set.
	Digest string
	Count  int
}

type doc struct {
	tool  Tool
	model string
	terms map[string]*[nFields]float64 // term frequency in each field
	len   [nFields]float64             // each field's length in terms
	size  int64
}

// The fields of BM25F, with their weights.
const (
	fieldName = iota
	fieldTitle
	fieldDesc
	nFields
)

var fieldWeight = [nFields]float64{fieldName: weightName, fieldTitle: weightTitle, fieldDesc: weightDesc}

// Set is a built visible set.
type Set struct {
	docs   []doc              // by model name
	post   map[string][]int32 // term → indexes of docs holding it
	avgLen [nFields]float64
	digest string
}

// Field weights of the BM25F bag.
const (
	weightName  = 3
	weightTitle = 2
	weightDesc  = 1
	k1          = 1.2
	b           = 0.75
)

// Build builds the set. A tool id listed twice (the same server through two
// audience classes) is kept once, through the smallest class name.
func Build(tools []Tool) *Set {
	byID := map[string]Tool{}
	for _, t := range tools {
		if prev, ok := byID[t.ToolID]; !ok || t.AudienceClass < prev.AudienceClass {
			byID[t.ToolID] = t
		}
	}
	names := map[string]int{}
	for _, t := range byID {
		names[t.Name]++
	}
	s := &Set{}
	used := map[string]string{}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		t := byID[id]
		model := t.Name
		if names[t.Name] > 1 {
			model = t.ServerID + "__" + t.Name
		}
		if other, clash := used[model]; clash && other != id {
			model = t.ToolID // still ambiguous (names with "__"): the unique id
		}
		used[model] = id
		d := doc{tool: t, model: model, terms: map[string]*[nFields]float64{}, size: int64(len(t.Description) + len(t.InputSchema))}
		add := func(text string, f int) {
			for _, tok := range Tokenize(text) {
				tf := d.terms[tok]
				if tf == nil {
					tf = new([nFields]float64)
					d.terms[tok] = tf
				}
				tf[f]++
				d.len[f]++
			}
		}
		add(t.Name, fieldName)
		add(t.Title, fieldTitle)
		add(t.Description, fieldDesc)
		s.docs = append(s.docs, d)
	}
	slices.SortFunc(s.docs, func(a, b doc) int { return cmp.Compare(a.model, b.model) })
	s.post = map[string][]int32{}
	for i, d := range s.docs {
		for tok := range d.terms {
			s.post[tok] = append(s.post[tok], int32(i))
		}
	}
	h := sha256.New()
	var total [nFields]float64
	for _, d := range s.docs {
		for f := range total {
			total[f] += d.len[f]
		}
		t := d.tool
		for _, f := range []string{d.model, t.ToolID, t.ServerID, t.AudienceClass, strconv.FormatInt(t.Generation, 10),
			t.DescriptorDigest, t.Effect.String(), t.SourceState.String(), strconv.FormatBool(t.ConfirmationRequired)} {
			h.Write([]byte(strconv.Itoa(len(f)) + ":" + f))
		}
		if t.Conditional {
			// Written only when set, so every digest of a set without
			// conditions is what it was before conditions existed.
			h.Write([]byte("11:conditional"))
		}
		h.Write([]byte{'\n'})
	}
	for f := range total {
		if len(s.docs) > 0 && total[f] > 0 {
			s.avgLen[f] = total[f] / float64(len(s.docs))
		}
	}
	s.digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return s
}

// Digest is the digest of the whole visible set.
func (s *Set) Digest() string { return s.digest }

// Len is the size of the whole visible set.
func (s *Set) Len() int { return len(s.docs) }

type scored struct {
	i     int
	score float64
}

// Rank returns the indexes of the tools matching query, best first (ties
// by model name).
func (s *Set) Rank(query string) []scored {
	q := Tokenize(query)
	slices.Sort(q)
	q = slices.Compact(q)
	n := float64(len(s.docs))
	acc := map[int32]float64{}
	for _, tok := range q {
		df := float64(len(s.post[tok]))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, i := range s.post[tok] {
			// BM25F: each field's frequency normalised by that field's
			// length, weighted, summed, then saturated once.
			d := &s.docs[i]
			tf := d.terms[tok]
			var w float64
			for f := range nFields {
				if tf[f] > 0 {
					w += fieldWeight[f] * tf[f] / (1 - b + b*d.len[f]/s.avgLen[f])
				}
			}
			acc[i] += idf * w * (k1 + 1) / (w + k1)
		}
	}
	out := make([]scored, 0, len(acc))
	for i, score := range acc {
		out = append(out, scored{int(i), score})
	}
	slices.SortFunc(out, func(a, c scored) int {
		if a.score != c.score {
			return cmp.Compare(c.score, a.score)
		}
		return cmp.Compare(s.docs[a.i].model, s.docs[c.i].model)
	})
	return out
}

// Select answers one request.
func (s *Set) Select(f Filters) Result {
	res := Result{Digest: s.digest, Count: len(s.docs)}
	var order []int
	if strings.TrimSpace(f.Query) != "" {
		for _, r := range s.Rank(f.Query) {
			order = append(order, r.i)
		}
	} else {
		for i := range s.docs {
			order = append(order, i)
		}
	}
	var bytes int64
	for _, i := range order {
		d := s.docs[i]
		if len(f.Effects) > 0 && !slices.Contains(f.Effects, d.tool.Effect) {
			continue
		}
		if (f.MaxTools > 0 && len(res.Tools) >= f.MaxTools) || (f.MaxBytes > 0 && bytes+d.size > f.MaxBytes) {
			res.Truncated = true
			break
		}
		bytes += d.size
		res.Tools = append(res.Tools, view(d))
	}
	return res
}

func view(d doc) *admissionv1.VisibleTool {
	t := d.tool
	return &admissionv1.VisibleTool{
		Model: &admissionv1.ModelTool{Name: d.model, Description: t.Description, InputSchema: t.InputSchema},
		Runtime: &admissionv1.RuntimeTool{
			ToolId: t.ToolID, ServerId: t.ServerID, AudienceClass: t.AudienceClass, Generation: t.Generation,
			DescriptorDigest: t.DescriptorDigest, EffectClass: t.Effect, SourceState: t.SourceState,
			ConfirmationRequired: t.ConfirmationRequired, Conditional: t.Conditional,
		},
	}
}

// Tokenize splits text into lowercased, lightly stemmed words: at every
// non-letter, non-digit, where a lower-case letter meets an upper-case
// one (`getShipment` → get, shipment) and before the last capital of an
// acronym followed by a lower-case letter (`HTTPServer` → http, server).
// English function words (articles, pronouns, auxiliaries, the commonest
// prepositions) are dropped.
func Tokenize(text string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			if w := strings.ToLower(string(cur)); !stopwords[w] {
				out = append(out, stem(w))
			}
			cur = cur[:0]
		}
	}
	var prev rune
	rs := []rune(text)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			// getShipment → get|Shipment; HTTPServer → HTTP|Server.
			acronymEnd := unicode.IsUpper(r) && unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsUpper(r) && unicode.IsLower(prev) || acronymEnd {
				flush()
			}
			cur = append(cur, r)
		default:
			flush()
		}
		prev = r
	}
	flush()
	return out
}

func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "xes")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	case len(w) > 5 && strings.HasSuffix(w, "ing"):
		return w[:len(w)-3]
	case len(w) > 4 && strings.HasSuffix(w, "ed"):
		return w[:len(w)-2]
	}
	return w
}

// stopwords are English function words: they say nothing about which tool
// is meant, yet sit in most descriptions and queries, so they drag short
// descriptions up and make every query walk most postings. Question words,
// negation and particles (how, who, not, out, back, up) are kept: they
// carry intent.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be been being by did do does for from had has have i in
		into is it its me my of on or our ours so than that the their them then these they this those to was we were
		will with would you your yours`) {
		m[w] = true
	}
	return m
}()
