package comparison

import (
	"fmt"
	"slices"
	"testing"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

func d(n int) string { return fmt.Sprintf("sha256:%064x", n) }

func TestAgainstStatic(t *testing.T) {
	tools := []Tool{
		{Name: "b", DescriptorDigest: d(1), InputSchemaDigest: d(11)},
		{Name: "a", DescriptorDigest: d(2), InputSchemaDigest: d(12)},
		{Name: "c", DescriptorDigest: d(3), InputSchemaDigest: d(13)},
		{Name: "e", DescriptorDigest: d(4), InputSchemaDigest: d(14)},
	}
	for _, tc := range []struct {
		name                  string
		static                []Entry
		missing, extra, names []string
		compared              []string
		same                  int32
	}{
		{name: "empty list: every tool is extra", extra: []string{"a", "b", "c", "e"}},
		{name: "names only count presence", static: []Entry{{Name: "a"}, {Name: "z"}, {Name: "b"}},
			missing: []string{"z"}, extra: []string{"c", "e"}, same: 2},
		{name: "a descriptor digest must match", static: []Entry{{Name: "a", DescriptorDigest: d(2)}, {Name: "b", DescriptorDigest: d(9)}},
			extra: []string{"c", "e"}, names: []string{"b"}, compared: []string{ComparedDescriptor}, same: 1},
		{name: "an input schema digest must match the tool's", static: []Entry{{Name: "c", InputSchemaDigest: d(13)},
			{Name: "e", InputSchemaDigest: d(4)}, {Name: "a"}, {Name: "b"}},
			names: []string{"e"}, compared: []string{ComparedInputSchema}, same: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AgainstStatic(tc.static, tools)
			if !slices.Equal(got.GetMissing(), tc.missing) || !slices.Equal(got.GetExtra(), tc.extra) || got.GetSameCount() != tc.same {
				t.Fatalf("missing %v extra %v same %d; want %v %v %d", got.GetMissing(), got.GetExtra(), got.GetSameCount(), tc.missing, tc.extra, tc.same)
			}
			var names, compared []string
			for _, c := range got.GetChanged() {
				names, compared = append(names, c.GetName()), append(compared, c.GetCompared())
			}
			if !slices.Equal(names, tc.names) || !slices.Equal(compared, tc.compared) {
				t.Fatalf("changed %v", got.GetChanged())
			}
			if int(got.GetMissingCount()) != len(tc.missing) || int(got.GetExtraCount()) != len(tc.extra) ||
				int(got.GetChangedCount()) != len(tc.names) || got.GetTruncated() {
				t.Fatalf("counts %v", got)
			}
		})
	}
}

func TestAgainstPreviousComparesDescriptorDigests(t *testing.T) {
	prev := []Tool{{Name: "a", DescriptorDigest: d(1)}, {Name: "b", DescriptorDigest: d(2)}, {Name: "gone", DescriptorDigest: d(3)}}
	now := []Tool{{Name: "a", DescriptorDigest: d(1), InputSchemaDigest: d(7)}, {Name: "b", DescriptorDigest: d(5)}, {Name: "new", DescriptorDigest: d(6)}}
	got := AgainstPrevious(prev, now)
	want := &discoveryv1.ToolChange{Name: "b", Compared: ComparedDescriptor, ExpectedDigest: d(2), ActualDigest: d(5)}
	if !slices.Equal(got.GetMissing(), []string{"gone"}) || !slices.Equal(got.GetExtra(), []string{"new"}) ||
		len(got.GetChanged()) != 1 || got.GetChanged()[0].String() != want.String() || got.GetSameCount() != 1 {
		t.Fatalf("%v", got)
	}
}

func TestListsAreCutCountsAreNot(t *testing.T) {
	var tools []Tool
	for i := range MaxListed + 5 {
		tools = append(tools, Tool{Name: fmt.Sprintf("t%05d", i)})
	}
	got := AgainstStatic(nil, tools)
	if len(got.GetExtra()) != MaxListed || got.GetExtraCount() != MaxListed+5 || !got.GetTruncated() || got.GetExtra()[0] != "t00000" {
		t.Fatalf("%d listed, count %d, truncated %v", len(got.GetExtra()), got.GetExtraCount(), got.GetTruncated())
	}
}
