package policy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const shipmentSchema = `{"type":"object","properties":{"shipment_id":{"type":"string"},"status":{"type":"string"},
"updated_at":{"type":"string"}},"required":["shipment_id","status"]}`

func TestApply(t *testing.T) {
	out, err := CompileOutput(json.RawMessage(shipmentSchema))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		rules     Rules
		in        string
		want      string // projected JSON; "" when refused or none
		dropped   []string
		refusal   string
		noContent bool
	}{
		{name: "projection drops a field", rules: Rules{AllowedFields: []string{"shipment_id", "status", "updated_at"}, Output: out},
			in: `{"shipment_id":"S-1","status":"moving","internal_cost":12.5}`, want: `{"shipment_id":"S-1","status":"moving"}`, dropped: []string{"internal_cost"}},
		{name: "nothing to drop keeps the bytes", rules: Rules{AllowedFields: []string{"shipment_id", "status"}},
			in: `{"shipment_id":"S-1", "status":"moving"}`, want: `{"shipment_id":"S-1", "status":"moving"}`},
		{name: "missing evidence refuses naming it", rules: Rules{AllowedFields: []string{"shipment_id", "status", "updated_at"}, RequiredEvidence: []string{"shipment_id", "updated_at"}},
			in: `{"shipment_id":"S-1","status":"moving"}`, refusal: ReasonMissingEvidence},
		{name: "null evidence counts as missing", rules: Rules{RequiredEvidence: []string{"updated_at"}},
			in: `{"updated_at":null}`, refusal: ReasonMissingEvidence},
		{name: "evidence dropped by the projection is missing", rules: Rules{AllowedFields: []string{"status"}, RequiredEvidence: []string{"shipment_id"}},
			in: `{"shipment_id":"S-1","status":"moving"}`, refusal: ReasonMissingEvidence},
		{name: "no structured content with evidence required", rules: Rules{RequiredEvidence: []string{"shipment_id"}}, in: ``, refusal: ReasonMissingEvidence},
		{name: "no structured content with an output schema", rules: Rules{Output: out}, in: ``, refusal: ReasonOutputInvalid},
		{name: "no structured content and no rules", rules: Rules{}, in: ``, noContent: true},
		{name: "no structured content under allowed fields", rules: Rules{AllowedFields: []string{"shipment_id"}}, in: ``, refusal: ReasonNotStructured},
		{name: "null structured content under allowed fields", rules: Rules{AllowedFields: []string{"shipment_id"}}, in: `null`, refusal: ReasonNotStructured},
		{name: "no structured content under allowed fields, evidence and a schema", rules: Rules{AllowedFields: []string{"shipment_id"},
			RequiredEvidence: []string{"shipment_id"}, Output: out}, in: ``, refusal: ReasonNotStructured},
		{name: "output schema violated after projection", rules: Rules{AllowedFields: []string{"shipment_id", "status"}, Output: out},
			in: `{"shipment_id":"S-1","status":7}`, refusal: ReasonOutputInvalid},
		{name: "array cannot be projected", rules: Rules{AllowedFields: []string{"a"}}, in: `[1,2]`, refusal: ReasonNotObject},
		{name: "no field rules validates only", rules: Rules{Output: out}, in: `{"shipment_id":"S-1","status":"x","extra":1}`,
			want: `{"shipment_id":"S-1","status":"x","extra":1}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, r := c.rules.Apply(json.RawMessage(c.in))
			if c.refusal != "" {
				if r == nil || r.Reason != c.refusal {
					t.Fatalf("refusal %v, want %s", r, c.refusal)
				}
				return
			}
			if r != nil {
				t.Fatalf("refused: %v", r)
			}
			if c.noContent {
				if got.Structured != nil {
					t.Fatalf("structured %s, want none", got.Structured)
				}
				return
			}
			if string(got.Structured) != c.want {
				t.Fatalf("structured %s, want %s", got.Structured, c.want)
			}
			if !slices.Equal(got.Dropped, c.dropped) {
				t.Fatalf("dropped %v, want %v", got.Dropped, c.dropped)
			}
		})
	}
}

func TestMissingEvidenceNamesEveryField(t *testing.T) {
	_, r := Rules{RequiredEvidence: []string{"shipment_id", "updated_at"}}.Apply(json.RawMessage(`{"status":"x"}`))
	if r == nil || r.Detail != "the result lacks required evidence: shipment_id, updated_at" {
		t.Fatalf("refusal %v", r)
	}
}

func TestCompileOutputRefusesRemoteRef(t *testing.T) {
	if _, err := CompileOutput(json.RawMessage(`{"$ref":"https://example.invalid/s.json"}`)); err == nil {
		t.Fatal("a schema with a remote $ref compiled")
	}
}

func TestBudgetFor(t *testing.T) {
	cases := []struct {
		name     string
		contract int64
		want     Budget
	}{
		{name: "no contract budget is the gateway default", contract: 0, want: Budget{Bytes: 64 << 10, PreviewBytes: 1024}},
		{name: "a contract budget replaces the default", contract: 4096, want: Budget{Bytes: 4096, PreviewBytes: 1024}},
		{name: "a small budget halves the preview", contract: 1024, want: Budget{Bytes: 1024, PreviewBytes: 512}},
		{name: "a budget over the default is kept", contract: 1 << 20, want: Budget{Bytes: 1 << 20, PreviewBytes: 1024}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := BudgetFor(c.contract, 64<<10, 1024); got != c.want {
				t.Fatalf("BudgetFor(%d) = %+v, want %+v", c.contract, got, c.want)
			}
		})
	}
}

// An error result under allowed fields becomes a generic refusal naming
// only the upstream's code; without allowed fields it passes (nil).
func TestUpstreamError(t *testing.T) {
	if r := (Rules{RequiredEvidence: []string{"a"}}).UpstreamError("E42"); r != nil {
		t.Fatalf("rules without allowed fields refused an error: %v", r)
	}
	restricted := Rules{AllowedFields: []string{"a"}}
	r := restricted.UpstreamError("E42")
	if r == nil || r.Reason != ReasonUpstreamError ||
		r.Detail != "the tool reported an error (upstream error code E42); its text is withheld, as the tool's contract passes on only its named fields" {
		t.Fatalf("refusal %+v", r)
	}
	if r := restricted.UpstreamError(""); r == nil || r.Reason != ReasonUpstreamError || !strings.HasPrefix(r.Detail, "the tool reported an error without an error code;") {
		t.Fatalf("refusal %+v", r)
	}
}

// ErrorCode keeps a short token from the executor kit's failure or the
// structured content's code, and nothing else.
func TestErrorCode(t *testing.T) {
	long := strings.Repeat("E", 65)
	for _, c := range []struct {
		name       string
		failure    any
		structured string
		want       string
	}{
		{name: "the kit's failure name", failure: "LEASE_EXPIRED", structured: `{"code":"OTHER"}`, want: "LEASE_EXPIRED"},
		{name: "a string code", structured: `{"code":"inventory.not_found","message":"row 7 of table secrets"}`, want: "inventory.not_found"},
		{name: "an integer code", structured: `{"code":-32001}`, want: "-32001"},
		{name: "free text is no code", structured: `{"code":"the password is hunter2"}`, want: ""},
		{name: "a long token is no code", structured: `{"code":"` + long + `"}`, want: ""},
		{name: "a fraction is no code", structured: `{"code":1.5}`, want: ""},
		{name: "an object is no code", structured: `{"code":{"x":1}}`, want: ""},
		{name: "a failure that is not a token falls back", failure: "not a token", structured: `{"code":"E1"}`, want: "E1"},
		{name: "no structured content", failure: 7, want: ""},
		{name: "not an object", structured: `[1]`, want: ""},
	} {
		if got := ErrorCode(c.failure, json.RawMessage(c.structured)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
