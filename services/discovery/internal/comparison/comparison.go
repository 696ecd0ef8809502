package comparison

import (
	"sort"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

// MaxListed is how many names each list of a [discoveryv1.ToolDiff] holds;
// the counts stay exact beyond it and `truncated` is set.
const MaxListed = 1000

// What a [discoveryv1.ToolChange] compared.
const (
	ComparedDescriptor  = "descriptor_digest"
	ComparedInputSchema = "input_schema_digest"
)

// Tool is a generation's tool as compared: its name and digests.
type Tool struct {
	Name              string
	DescriptorDigest  string
	InputSchemaDigest string
}

// Entry is one static list entry: a name and at most one of a descriptor
// digest and an input schema digest (neither: presence only).
type Entry struct {
	Name              string `json:"name"`
	DescriptorDigest  string `json:"descriptor_digest,omitempty"`
	InputSchemaDigest string `json:"input_schema_digest,omitempty"`
}

// AgainstStatic compares a generation's tools with a static list: an entry
// missing from the tools is missing, a tool without an entry is extra, and
// an entry with a digest whose tool has another digest (the descriptor's,
// or the input schema's) is changed.
func AgainstStatic(static []Entry, tools []Tool) *discoveryv1.ToolDiff {
	byName := make(map[string]Tool, len(tools))
	for _, t := range tools {
		byName[t.Name] = t
	}
	var d diff
	seen := make(map[string]bool, len(static))
	for _, e := range static {
		seen[e.Name] = true
		t, ok := byName[e.Name]
		switch {
		case !ok:
			d.missing = append(d.missing, e.Name)
		case e.DescriptorDigest != "" && e.DescriptorDigest != t.DescriptorDigest:
			d.changed = append(d.changed, &discoveryv1.ToolChange{Name: e.Name, Compared: ComparedDescriptor,
				ExpectedDigest: e.DescriptorDigest, ActualDigest: t.DescriptorDigest})
		case e.InputSchemaDigest != "" && e.InputSchemaDigest != t.InputSchemaDigest:
			d.changed = append(d.changed, &discoveryv1.ToolChange{Name: e.Name, Compared: ComparedInputSchema,
				ExpectedDigest: e.InputSchemaDigest, ActualDigest: t.InputSchemaDigest})
		default:
			d.same++
		}
	}
	for _, t := range tools {
		if !seen[t.Name] {
			d.extra = append(d.extra, t.Name)
		}
	}
	return d.proto()
}

// AgainstPrevious compares a generation's tools with the previous
// generation's: changed means another descriptor digest.
func AgainstPrevious(previous, tools []Tool) *discoveryv1.ToolDiff {
	static := make([]Entry, len(previous))
	for i, t := range previous {
		static[i] = Entry{Name: t.Name, DescriptorDigest: t.DescriptorDigest}
	}
	return AgainstStatic(static, tools)
}

type diff struct {
	missing, extra []string
	changed        []*discoveryv1.ToolChange
	same           int
}

func (d *diff) proto() *discoveryv1.ToolDiff {
	sort.Strings(d.missing)
	sort.Strings(d.extra)
	sort.Slice(d.changed, func(i, j int) bool { return d.changed[i].GetName() < d.changed[j].GetName() })
	out := &discoveryv1.ToolDiff{MissingCount: int32(len(d.missing)), ExtraCount: int32(len(d.extra)),
		ChangedCount: int32(len(d.changed)), SameCount: int32(d.same)}
	out.Missing, out.Truncated = cut(d.missing, out.Truncated)
	out.Extra, out.Truncated = cut(d.extra, out.Truncated)
	if len(d.changed) > MaxListed {
		d.changed, out.Truncated = d.changed[:MaxListed], true
	}
	out.Changed = d.changed
	return out
}

func cut(names []string, truncated bool) ([]string, bool) {
	if len(names) > MaxListed {
		return names[:MaxListed], true
	}
	return names, truncated
}
