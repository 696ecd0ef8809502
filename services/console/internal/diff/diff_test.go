package diff

import (
	"reflect"
	"strings"
	"testing"
)

func TestTextTourChange(t *testing.T) {
	got := Text("Query the status of a shipment.", "Query the status of a shipment and try to repair it.")
	want := []Span{{Equal, "Query the status of a "}, {Delete, "shipment."}, {Insert, "shipment and try to repair it."}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Text = %#v, want %#v", got, want)
	}
}

func TestTextGroupsWordChanges(t *testing.T) {
	got := Text("Read the status of one shipment and when it last changed.", "Query the status of a shipment and try to repair it.")
	want := []Span{{Delete, "Read"}, {Insert, "Query"}, {Equal, " the status of "}, {Delete, "one"}, {Insert, "a"},
		{Equal, " shipment and "}, {Delete, "when it last changed."}, {Insert, "try to repair it."}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Text = %#v", got)
	}
}

func TestTextRebuildsBothSides(t *testing.T) {
	cases := [][2]string{
		{"", ""}, {"", "new text"}, {"old text", ""}, {"a b c", "a x c"},
		{"one  two\tthree", "one two three four"}, {"héllo wörld", "hello wörld!"},
		{"same", "same"}, {"x y z", "z y x"},
	}
	for _, c := range cases {
		var old, new strings.Builder
		for _, s := range Text(c[0], c[1]) {
			if s.Op != Insert {
				old.WriteString(s.Text)
			}
			if s.Op != Delete {
				new.WriteString(s.Text)
			}
		}
		if old.String() != c[0] || new.String() != c[1] {
			t.Errorf("Text(%q, %q) rebuilds %q and %q", c[0], c[1], old.String(), new.String())
		}
	}
}

func TestTextBoundedOnHostileInput(t *testing.T) {
	// Far more tokens than the LCS bound: one delete and one insert, at once.
	old := strings.Repeat("a ", 100_000)
	new := strings.Repeat("b ", 100_000)
	got := Text(old, new)
	if len(got) != 3 || got[0].Op != Delete || got[1].Op != Insert || got[2] != (Span{Equal, " "}) {
		t.Fatalf("got %d spans", len(got))
	}
	// A megabyte without a space is one token.
	if got := Text(strings.Repeat("x", 1<<20), "y"); len(got) != 2 {
		t.Fatalf("got %d spans", len(got))
	}
}

func TestSchemaStructural(t *testing.T) {
	old := `{"type":"object","properties":{"shipment_id":{"type":"string"},"verbose":{"type":"boolean"}},"required":["shipment_id"]}`
	new := `{"type":"object","properties":{"shipment_id":{"type":"integer","minimum":1},"repair":{"type":"boolean"}},"required":["shipment_id","repair"],"additionalProperties":false}`
	got := Schema([]byte(old), []byte(new))
	want := []Change{
		{Path: "", What: "additionalProperties", Kind: Added, New: "false"},
		{Path: "properties.repair", What: "property", Kind: Added, New: `{"type":"boolean"}`},
		{Path: "properties.shipment_id", What: "minimum", Kind: Added, New: "1"},
		{Path: "properties.shipment_id", What: "type", Kind: Changed, Old: `"string"`, New: `"integer"`},
		{Path: "properties.verbose", What: "property", Kind: Removed, Old: `{"type":"boolean"}`},
		{Path: "", What: "required", Kind: Added, New: "repair"},
	}
	if got.Truncated || !reflect.DeepEqual(got.Changes, want) {
		t.Fatalf("Schema =\n%#v\nwant\n%#v", got.Changes, want)
	}
}

func TestSchemaNestedItemsAndNoChange(t *testing.T) {
	s := `{"type":"object","properties":{"lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"}}}}}}`
	if got := Schema([]byte(s), []byte(s)); len(got.Changes) != 0 {
		t.Fatalf("equal schemas: %#v", got.Changes)
	}
	n := strings.Replace(s, `"sku":{"type":"string"}`, `"sku":{"type":"string","maxLength":8}`, 1)
	got := Schema([]byte(s), []byte(n))
	want := []Change{{Path: "properties.lines.items.properties.sku", What: "maxLength", Kind: Added, New: "8"}}
	if !reflect.DeepEqual(got.Changes, want) {
		t.Fatalf("got %#v", got.Changes)
	}
}

func TestSchemaNoneAndInvalid(t *testing.T) {
	got := Schema(nil, []byte(`{"type":"object"}`))
	if len(got.Changes) != 1 || got.Changes[0].Kind != Added || got.Changes[0].What != "schema" {
		t.Fatalf("no schema → schema: %#v", got.Changes)
	}
	got = Schema([]byte(`{"type":`), []byte(`{"type":"object"}`))
	if len(got.Changes) != 1 || got.Changes[0].What != "schema" || got.Changes[0].Kind != Changed {
		t.Fatalf("invalid → valid: %#v", got.Changes)
	}
}

func TestSchemaBounded(t *testing.T) {
	// More properties than the change cap: truncated, never more.
	var b strings.Builder
	b.WriteString(`{"properties":{`)
	for i := range 2000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"p` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + itoa(i) + `":{}`)
	}
	b.WriteString(`}}`)
	got := Schema(nil, []byte(b.String()))
	if len(got.Changes) != 1 { // no old schema: the whole schema is added
		t.Fatalf("got %d", len(got.Changes))
	}
	got = Schema([]byte(`{"properties":{}}`), []byte(b.String()))
	if !got.Truncated || len(got.Changes) != MaxSchemaChanges {
		t.Fatalf("got %d changes, truncated %v", len(got.Changes), got.Truncated)
	}
	// Nesting deeper than the depth bound: truncated, no stack blow-up.
	deep := strings.Repeat(`{"items":`, 1000) + `{"type":"string"}` + strings.Repeat(`}`, 1000)
	deep2 := strings.Repeat(`{"items":`, 1000) + `{"type":"integer"}` + strings.Repeat(`}`, 1000)
	got = Schema([]byte(deep), []byte(deep2))
	if !got.Truncated || len(got.Changes) != 0 {
		t.Fatalf("deep: %d changes, truncated %v", len(got.Changes), got.Truncated)
	}
	// A long value is cut in the change, never echoed whole.
	long := `{"description":"` + strings.Repeat("é", 5000) + `"}`
	got = Schema([]byte(`{"description":"a"}`), []byte(long))
	if len(got.Changes) != 1 || len(got.Changes[0].New) > maxValueBytes+len("…") {
		t.Fatalf("long value: %#v", got.Changes)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for i > 0 {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
	}
	return string(b)
}
