package contract

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/canonical"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// shipmentStatus is the seed article's example contract.
func shipmentStatus() *registryv1.ToolContract {
	return &registryv1.ToolContract{
		ToolId:            "logistics.shipment_status",
		Effect:            catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY,
		Scope:             "shipment:read",
		Authorization:     registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT,
		DeadlineMs:        2000,
		DownstreamMapping: &registryv1.DownstreamMapping{Destination: "shipments-api", Operation: "GET /shipments/{id}"},
		AllowedFields:     []string{"updated_at", "shipment_id", "status"},
		RequiredEvidence:  []string{"updated_at", "shipment_id"},
	}
}

const descriptorDigest = "sha256:7c1a3f5e0d9b8c7a6f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0f9e"

// The approval digest is pinned: the exact JSON shape documented on Doc,
// canonicalized, hashed. A change here changes every stored approval.
func TestApprovalDigestGolden(t *testing.T) {
	d := FromProto(shipmentStatus())
	wantJSON := `{"contract":{"allowed_fields":["shipment_id","status","updated_at"],` +
		`"authorization":"AUTHORIZATION_CALLER_AND_TENANT","confirmation":"CONFIRMATION_UNSPECIFIED",` +
		`"data_policy":{"classification":"internal","personal_data":false,"retention_days":0},"deadline_ms":2000,` +
		`"downstream_mapping":{"destination":"shipments-api","identity":"","operation":"GET /shipments/{id}"},` +
		`"effect":"EFFECT_CLASS_READ_ONLY","required_evidence":["shipment_id","updated_at"],"scope":"shipment:read",` +
		`"tool_id":"logistics.shipment_status"},"descriptor_digest":"` + descriptorDigest + `"}`
	got, err := canonical.Marshal(approvalInput{DescriptorDigest: descriptorDigest, Contract: d})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != wantJSON {
		t.Fatalf("canonical approval input:\n got %s\nwant %s", got, wantJSON)
	}
	digest, err := ApprovalDigest(descriptorDigest, d)
	if err != nil {
		t.Fatal(err)
	}
	const want = "sha256:d5e3f70cb7916b282831a230217eb714706786ffb00b953804747409f5fe088e"
	if digest != canonical.DigestBytes([]byte(wantJSON)) {
		t.Fatalf("digest %s is not the sha256 of the documented JSON", digest)
	}
	if digest != want {
		t.Fatalf("golden approval digest changed: got %s want %s", digest, want)
	}
}

// Order and spelling variants of the same contract give one digest; any
// content change gives another.
func TestApprovalDigestBindsContent(t *testing.T) {
	base, _ := ApprovalDigest(descriptorDigest, FromProto(shipmentStatus()))
	same := shipmentStatus()
	same.AllowedFields = []string{"status", "shipment_id", "updated_at"}
	same.DataPolicy = &registryv1.DataPolicy{Classification: "internal"}
	if d, _ := ApprovalDigest(descriptorDigest, FromProto(same)); d != base {
		t.Fatalf("reordered lists or explicit default classification changed the digest")
	}
	changes := map[string]func(c *registryv1.ToolContract){
		"effect":       func(c *registryv1.ToolContract) { c.Effect = catalogv1.EffectClass_EFFECT_CLASS_WRITE },
		"scope":        func(c *registryv1.ToolContract) { c.Scope = "shipment:write" },
		"deadline":     func(c *registryv1.ToolContract) { c.DeadlineMs = 2001 },
		"downstream":   func(c *registryv1.ToolContract) { c.DownstreamMapping.Identity = "svc" },
		"data policy":  func(c *registryv1.ToolContract) { c.DataPolicy = &registryv1.DataPolicy{PersonalData: true} },
		"allowed":      func(c *registryv1.ToolContract) { c.AllowedFields = append(c.AllowedFields, "address") },
		"evidence":     func(c *registryv1.ToolContract) { c.RequiredEvidence = c.RequiredEvidence[:1] },
		"confirmation": func(c *registryv1.ToolContract) { c.Confirmation = registryv1.Confirmation_CONFIRMATION_ALWAYS },
		"auth":         func(c *registryv1.ToolContract) { c.Authorization = registryv1.Authorization_AUTHORIZATION_SERVICE },
		"budget":       func(c *registryv1.ToolContract) { c.ResultBudgetBytes = 4096 },
		"sampling":     func(c *registryv1.ToolContract) { c.AllowSampling = true },
	}
	for name, change := range changes {
		c := shipmentStatus()
		change(c)
		if d, _ := ApprovalDigest(descriptorDigest, FromProto(c)); d == base {
			t.Errorf("changing %s did not change the approval digest", name)
		}
	}
	other := "sha256:" + strings.Repeat("0", 64)
	if d, _ := ApprovalDigest(other, FromProto(shipmentStatus())); d == base {
		t.Error("a new descriptor digest did not change the approval digest")
	}
}

// A budget is in the digested JSON when set and absent when 0, so the
// golden digest above (no budget) is the one approvals had before the field.
func TestApprovalDigestResultBudget(t *testing.T) {
	c := shipmentStatus()
	c.ResultBudgetBytes = 4096
	got, err := canonical.Marshal(approvalInput{DescriptorDigest: descriptorDigest, Contract: FromProto(c)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"required_evidence":["shipment_id","updated_at"],"result_budget_bytes":4096,"scope":`) {
		t.Fatalf("canonical approval input lacks the budget in its place: %s", got)
	}
	got, _ = canonical.Marshal(approvalInput{DescriptorDigest: descriptorDigest, Contract: FromProto(shipmentStatus())})
	if strings.Contains(string(got), "result_budget_bytes") {
		t.Fatalf("a contract without a budget carries the member: %s", got)
	}
	b, _ := FromProto(c).Marshal()
	back, err := Unmarshal(b)
	if err != nil || back.Proto().GetResultBudgetBytes() != 4096 {
		t.Fatalf("stored budget did not round-trip: %v %d", err, back.Proto().GetResultBudgetBytes())
	}
}

// Allowing sampling is in the digested JSON when set and absent when
// false, so a contract that never sets it keeps the golden digest above
// (the one approvals had before the field), and one that sets it has a
// digest no earlier approval covers.
func TestApprovalDigestAllowSampling(t *testing.T) {
	c := shipmentStatus()
	c.AllowSampling = true
	got, err := canonical.Marshal(approvalInput{DescriptorDigest: descriptorDigest, Contract: FromProto(c)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `{"contract":{"allow_sampling":true,"allowed_fields":[`) {
		t.Fatalf("canonical approval input lacks allow_sampling in its place: %s", got)
	}
	off := shipmentStatus()
	off.AllowSampling = false
	got, _ = canonical.Marshal(approvalInput{DescriptorDigest: descriptorDigest, Contract: FromProto(off)})
	if strings.Contains(string(got), "allow_sampling") {
		t.Fatalf("a contract that does not allow sampling carries the member: %s", got)
	}
	const golden = "sha256:d5e3f70cb7916b282831a230217eb714706786ffb00b953804747409f5fe088e"
	if d, _ := ApprovalDigest(descriptorDigest, FromProto(off)); d != golden {
		t.Fatalf("a contract without sampling changed its digest: %s", d)
	}
	if d, _ := ApprovalDigest(descriptorDigest, FromProto(c)); d == golden {
		t.Fatal("allowing sampling kept the digest of the contract without it")
	}
	b, _ := FromProto(c).Marshal()
	back, err := Unmarshal(b)
	if err != nil || !back.Proto().GetAllowSampling() {
		t.Fatalf("stored allow_sampling did not round-trip: %v %v", err, back.Proto().GetAllowSampling())
	}
	// A contract stored before the field existed reads as not allowing it.
	old, err := Unmarshal([]byte(`{"tool_id":"a.b","effect":"EFFECT_CLASS_READ_ONLY","scope":"s:r","authorization":"AUTHORIZATION_CALLER",` +
		`"deadline_ms":0,"downstream_mapping":{},"data_policy":{"classification":"internal"},"allowed_fields":[],"required_evidence":[],"confirmation":"CONFIRMATION_UNSPECIFIED"}`))
	if err != nil || old.AllowSampling {
		t.Fatalf("an old stored contract: %v allow_sampling=%v", err, old.AllowSampling)
	}
}

func TestDocRoundTrip(t *testing.T) {
	d := FromProto(shipmentStatus())
	b, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back.Proto(), d.Proto()) {
		t.Fatalf("round trip changed the contract: %v != %v", back.Proto(), d.Proto())
	}
	if got := d.Proto().GetAllowedFields(); !slices.Equal(got, []string{"shipment_id", "status", "updated_at"}) {
		t.Fatalf("allowed fields not stored sorted: %v", got)
	}
}

const outputSchemaTool = `{"name":"shipment_status","inputSchema":{"type":"object"},
"outputSchema":{"type":"object","required":["shipment_id","status","updated_at","carrier"]}}`

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(c *registryv1.ToolContract)
		raw    string
		want   []apierror.FieldViolation
	}{
		{name: "valid", change: func(*registryv1.ToolContract) {}, raw: `{"name":"x"}`},
		{name: "budget at the floor", change: func(c *registryv1.ToolContract) { c.ResultBudgetBytes = MinResultBudgetBytes }},
		{name: "budget at the cap", change: func(c *registryv1.ToolContract) { c.ResultBudgetBytes = MaxResultBudgetBytes }},
		{name: "budget under 1 KiB", change: func(c *registryv1.ToolContract) { c.ResultBudgetBytes = 1023 },
			want: []apierror.FieldViolation{{Field: "contract.result_budget_bytes", Description: "must be 0 (the gateway's default) or between 1024 and 67108864"}}},
		{name: "budget over 64 MiB", change: func(c *registryv1.ToolContract) { c.ResultBudgetBytes = MaxResultBudgetBytes + 1 },
			want: []apierror.FieldViolation{{Field: "contract.result_budget_bytes", Description: "must be 0 (the gateway's default) or between 1024 and 67108864"}}},
		{name: "no projection keeps every output field", raw: outputSchemaTool,
			change: func(c *registryv1.ToolContract) { c.AllowedFields = nil }},
		{
			name:   "evidence outside the projection",
			change: func(c *registryv1.ToolContract) { c.RequiredEvidence = []string{"shipment_id", "address"} },
			want: []apierror.FieldViolation{{Field: "contract.required_evidence[1]",
				Description: `"address" is not in allowed_fields: the projection would remove evidence the contract requires`}},
		},
		{
			name: "projection drops outputSchema-required fields", raw: outputSchemaTool,
			change: func(c *registryv1.ToolContract) {},
			want: []apierror.FieldViolation{{Field: "contract.allowed_fields",
				Description: `drops "carrier", which the tool's outputSchema marks required`}},
		},
		{
			name: "missing effect, scope and authorization",
			change: func(c *registryv1.ToolContract) {
				c.Effect, c.Scope, c.Authorization = 0, "", 0
			},
			want: []apierror.FieldViolation{
				{Field: "contract.effect", Description: "required: one of READ_ONLY, RESERVATION, WRITE, DESTRUCTIVE"},
				{Field: "contract.scope", Description: "required, e.g. shipment:read"},
				{Field: "contract.authorization", Description: "required: one of CALLER_AND_TENANT, CALLER, SERVICE"},
			},
		},
		{
			name: "unknown enums, limits, duplicates, bad names",
			change: func(c *registryv1.ToolContract) {
				c.ToolId = "Logistics.x"
				c.Effect = 99
				c.Authorization = 42
				c.Confirmation = 7
				c.DeadlineMs = -1
				c.ResultBudgetBytes = -1
				c.Scope = "has space"
				c.DataPolicy = &registryv1.DataPolicy{Classification: "Top Secret", RetentionDays: 99999}
				c.AllowedFields = []string{"a", "a", ""}
				c.RequiredEvidence = []string{"a"}
				c.DownstreamMapping = &registryv1.DownstreamMapping{Operation: "GET\n/x"}
			},
			want: []apierror.FieldViolation{
				{Field: "contract.tool_id", Description: "must be <server_id>.<tool name>: server id [a-z0-9][a-z0-9_-]{0,62}, tool name [A-Za-z0-9_.-]{1,128}"},
				{Field: "contract.effect", Description: "unknown effect class 99"},
				{Field: "contract.scope", Description: "must match [A-Za-z0-9][A-Za-z0-9:._/*-]{0,127}"},
				{Field: "contract.authorization", Description: "unknown authorization 42"},
				{Field: "contract.confirmation", Description: "unknown confirmation 7"},
				{Field: "contract.deadline_ms", Description: "must be between 0 (platform default) and 600000"},
				{Field: "contract.result_budget_bytes", Description: "must be 0 (the gateway's default) or between 1024 and 67108864"},
				{Field: "contract.downstream_mapping.operation", Description: "contains a control character"},
				{Field: "contract.data_policy.classification", Description: "must match [a-z][a-z0-9_-]{0,31}, e.g. internal, confidential"},
				{Field: "contract.data_policy.retention_days", Description: "must be between 0 and 3650"},
				{Field: "contract.allowed_fields[1]", Description: `"a" is given twice`},
				{Field: "contract.allowed_fields[2]", Description: "empty field name"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := shipmentStatus()
			tc.change(c)
			got := Validate("contract", c, []byte(tc.raw))
			if !slices.Equal([]apierror.FieldViolation(got), tc.want) {
				t.Fatalf("violations:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestOutputRequired(t *testing.T) {
	cases := map[string][]string{
		outputSchemaTool: {"shipment_id", "status", "updated_at", "carrier"},
		`{"outputSchema":{"required":["a",1,"a",""]}}`: {"a"},
		`{"outputSchema":true}`:                        nil,
		`{"outputSchema":{"required":"a"}}`:            nil,
		`not json`:                                     nil,
		``:                                             nil,
	}
	for raw, want := range cases {
		if got := OutputRequired([]byte(raw)); !slices.Equal(got, want) {
			t.Errorf("OutputRequired(%s) = %q, want %q", raw, got, want)
		}
	}
}

// Validation reads untrusted descriptor JSON and contract text: it must
// never panic, whatever it is given.
func FuzzValidate(f *testing.F) {
	f.Add([]byte(outputSchemaTool), "shipment_id", "a")
	f.Add([]byte(`{"outputSchema":{"required":[]}}`), "", "")
	f.Fuzz(func(t *testing.T, raw []byte, allowed, evidence string) {
		c := shipmentStatus()
		c.AllowedFields = strings.Split(allowed, ",")
		c.RequiredEvidence = strings.Split(evidence, ",")
		v := Validate("contract", c, raw)
		if len(v) == 0 {
			if _, err := ApprovalDigest(descriptorDigest, FromProto(c)); err != nil {
				t.Fatalf("a valid contract has no digest: %v", err)
			}
		}
	})
}
