package canonical

import (
	"errors"
	"math"

	"strconv"
	"strings"
	"testing"
)

// The example of RFC 8785 §3.2.2 (input) and §3.2.3 (output).
func TestRFC8785Example(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := Transform([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// The property sorting example of RFC 8785 §3.2.3: names are ordered by
// UTF-16 code units, so U+1F600 (D83D DE00) sorts before U+FB33.
func TestRFC8785SortingExample(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	got, err := Transform([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	wantText := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	if string(got) != wantText {
		t.Fatalf("got  %s\nwant %s", got, wantText)
	}
}

// RFC 8785 Appendix B: IEEE 754 bit patterns and their required text.
func TestRFC8785AppendixBNumbers(t *testing.T) {
	cases := []struct{ bits, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	}
	for _, c := range cases {
		u, err := strconv.ParseUint(c.bits, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		f := math.Float64frombits(u)
		if got := string(AppendNumber(nil, f)); got != c.want {
			t.Errorf("%s: got %s, want %s", c.bits, got, c.want)
		}
		// The same value written as JSON text canonicalizes the same way.
		text := strconv.FormatFloat(f, 'g', -1, 64)
		got, err := Transform([]byte(text))
		if err != nil {
			t.Errorf("%s: %v", text, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("Transform(%s) = %s, want %s", text, got, c.want)
		}
	}
}

func TestRefusesNonIJSON(t *testing.T) {
	cases := map[string]string{
		"duplicate name":      `{"a":1,"a":2}`,
		"lone high surrogate": `"\ud800"`,
		"lone low surrogate":  `"\udc00x"`,
		"bad pair":            `"\ud800\u0041"`,
		"invalid utf8":        "\"\xff\"",
		"overflow":            `1e400`,
		"leading zero":        `01`,
		"trailing data":       `{} {}`,
		"bare control":        "\"a\x01\"",
		"bad escape":          `"\x"`,
		"trailing comma":      `[1,]`,
		"empty":               ``,
		"unterminated":        `{"a":`,
		"nan literal":         `NaN`,
		"plus sign":           `+1`,
		"fraction no digits":  `1.`,
		"too deep":            strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	}
	for name, in := range cases {
		_, err := Transform([]byte(in))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %q: err = %v, want ErrInvalid", name, in, err)
		}
	}
}

func TestStringEscaping(t *testing.T) {
	in := "\"\\u0000\\u001f\\b\\f\\n\\r\\t/<>&\u2028é\""
	want := "\"\\u0000\\u001f\\b\\f\\n\\r\\t/<>&\u2028é\""
	got, err := Transform([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func TestDigest(t *testing.T) {
	a, err := Digest([]byte(`{"b": 2, "a": [1.0, "x"]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Digest([]byte(`{"a":[1,"x"],"b":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("equal documents digest differently: %s %s", a, b)
	}
	// sha256 of the canonical text, computed independently with
	// `printf '%s' '{"a":[1,"x"],"b":2}' | sha256sum`.
	if want := "sha256:8cbd548a32262b76a6536efe4e7ba86a0e811fcd0475d83a43e10acd0615aa37"; a != want {
		t.Fatalf("digest %s, want %s", a, want)
	}
	c, _ := Digest([]byte(`{"a":[1,"x"],"b":3}`))
	if c == a {
		t.Fatal("different documents share a digest")
	}
}

func TestValidDigest(t *testing.T) {
	good := DigestBytes([]byte("x"))
	for s, want := range map[string]bool{
		good:                  true,
		strings.ToUpper(good): false,
		good[:len(good)-1]:    false,
		"sha1:" + good[7:]:    false,
		"":                    false,
	} {
		if ValidDigest(s) != want {
			t.Errorf("ValidDigest(%q) = %v", s, !want)
		}
	}
}
