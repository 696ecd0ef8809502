package validate

import (
	"regexp"
	"slices"
	"strings"
)

// Flag codes.
const (
	FlagDescriptionInstructions = "DESCRIPTION_INSTRUCTIONS"
	FlagAnnotationConflict      = "ANNOTATION_CONFLICT"
)

// instructionPatterns are the heuristics for text addressed to the model
// instead of describing the tool (tool poisoning). They are deliberately
// narrow: a match is recorded as a flag for review, never acted upon. Each
// runs only when the lowercased text contains one word of every group of its
// prefilter, which keeps a 100,000-tool catalog fast.
var instructionPatterns = []struct {
	re     *regexp.Regexp
	needed [][]string
}{
	// "ignore all previous instructions", "disregard the rules above"
	{regexp.MustCompile(`(?i)\b(ignore|disregard|forget|override)\b.{0,40}\b(previous|prior|above|earlier|all|any|other|system)\b.{0,20}\b(instructions?|prompts?|rules|messages|guidelines)\b`),
		[][]string{{"ignore", "disregard", "forget", "override"}, {"instruction", "prompt", "rules", "messages", "guidelines"}}},
	// <IMPORTANT>, <system>, </instructions> tags
	{regexp.MustCompile(`(?i)<\s*/?\s*(important|system|instructions?|admin|secret|hidden)\s*>`), [][]string{{"<"}}},
	// talk about the model's own prompt
	{regexp.MustCompile(`(?i)\b(system prompt|developer message|hidden instructions?|your instructions)\b`),
		[][]string{{"system prompt", "developer message", "hidden instruction", "your instructions"}}},
	// "do not tell the user", "never mention this to the user"
	{regexp.MustCompile(`(?i)\b(do not|don't|never|without)\b.{0,30}\b(tell|telling|inform|informing|mention|mentioning|reveal|revealing|show|showing|notify)\b.{0,30}\b(users?|humans?)\b`),
		[][]string{{"do not", "don't", "never", "without"}, {"user", "human"}}},
	// "before using any other tool", "instead of calling the other tools"
	{regexp.MustCompile(`(?i)\b(before|instead of|prior to)\b.{0,40}\b(using|calling|invoking|running)\b.{0,30}\b(any|other|another|all)\b.{0,20}\btools?\b`),
		[][]string{{"before", "instead of", "prior to"}, {"tool"}}},
	// requests to read or pass along secrets
	{regexp.MustCompile(`(?i)\b(read|send|pass|include|upload|forward|attach|cat)\b.{0,40}(~/\.|\.ssh\b|id_rsa|\.env\b|passwords?\b|credentials?\b|api[_ -]?keys?\b|private keys?\b|secrets?\b|access tokens?\b)`),
		[][]string{{"~/.", ".ssh", "id_rsa", ".env", "password", "credential", "api", "private key", "secret", "access token"}}},
	// role-play addressing the model
	{regexp.MustCompile(`(?i)\b(as an ai|you are an? (ai|assistant|language model)|assistant:)`),
		[][]string{{"as an ai", "you are a", "assistant:"}}},
}

// instructions returns the first instruction-like phrase in s, or "".
func instructions(s string) string {
	lower := strings.ToLower(s)
	for _, p := range instructionPatterns {
		ok := true
		for _, group := range p.needed {
			found := false
			for _, w := range group {
				if strings.Contains(lower, w) {
					found = true
					break
				}
			}
			if !found {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		if m := p.re.FindString(s); m != "" {
			return m
		}
	}
	return ""
}

// toolFlags returns the flags of one accepted tool.
func toolFlags(vt *Tool) []Flag {
	var flags []Flag
	// The texts are gathered in map order first: only when one of them
	// matches are they gathered again in key order, so the match named is
	// the first in that order.
	texts := func(sorted bool) []string {
		out := []string{vt.Description, vt.Title}
		if vt.Annotations != nil {
			out = append(out, vt.Annotations.Title)
		}
		for _, doc := range vt.docs {
			collectTexts(doc, &out, sorted)
		}
		return out
	}
	if slices.ContainsFunc(texts(false), func(s string) bool { return instructions(s) != "" }) {
		for _, s := range texts(true) {
			if m := instructions(s); m != "" {
				flags = append(flags, Flag{Tool: vt.Name, Flag: FlagDescriptionInstructions, Detail: "matched " + quote(m)})
				break
			}
		}
	}
	if a := vt.Annotations; a != nil && a.GetReadOnlyHint() && a.GetDestructiveHint() {
		flags = append(flags, Flag{Tool: vt.Name, Flag: FlagAnnotationConflict, Detail: "readOnlyHint and destructiveHint are both true (hints are not trusted either way)"})
	}
	return flags
}

// collectTexts appends the description and title strings of a decoded
// schema, members in key order when sorted, in map order otherwise.
func collectTexts(v any, out *[]string, sorted bool) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range memberNames(x, sorted) {
			if s, ok := x[k].(string); ok && (k == "description" || k == "title") {
				*out = append(*out, s)
				continue
			}
			collectTexts(x[k], out, sorted)
		}
	case []any:
		for _, e := range x {
			collectTexts(e, out, sorted)
		}
	}
}
