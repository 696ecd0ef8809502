package contract

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/ids"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Doc is a contract as the registry stores and hashes it. Its JSON form is
// fixed by the tags below; every member is always present:
//
//	{
//	  "allowed_fields": ["shipment_id", "status"],      sorted; [] for none
//	  "authorization": "AUTHORIZATION_CALLER_AND_TENANT",
//	  "confirmation": "CONFIRMATION_UNSPECIFIED",
//	  "data_policy": {"classification": "internal", "personal_data": false, "retention_days": 0},
//	  "deadline_ms": 2000,
//	  "downstream_mapping": {"destination": "", "identity": "", "operation": ""},
//	  "effect": "EFFECT_CLASS_READ_ONLY",
//	  "required_evidence": ["shipment_id"],              sorted; [] for none
//	  "result_budget_bytes": 4096,                       absent when 0
//	  "allow_sampling": true,                            absent when false
//	  "scope": "shipment:read",
//	  "tool_id": "logistics.shipment_status"
//	}
//
// Enums are written as their full proto names. An empty classification is
// stored as `internal`, which the API defines it to mean. The members that
// may be absent are result_budget_bytes, omitted when 0, and
// allow_sampling, omitted when false: they came after the first approvals,
// and a contract that does not set them keeps the digest it had; a
// contract that sets one has a new digest, as for any contract change (an
// approval of the old digest does not cover a contract that now allows
// sampling). Changing this shape changes every approval digest: never do
// it without a migration.
type Doc struct {
	ToolID            string     `json:"tool_id"`
	Effect            string     `json:"effect"`
	Scope             string     `json:"scope"`
	Authorization     string     `json:"authorization"`
	DeadlineMS        int32      `json:"deadline_ms"`
	DownstreamMapping Downstream `json:"downstream_mapping"`
	DataPolicy        DataPolicy `json:"data_policy"`
	AllowedFields     []string   `json:"allowed_fields"`
	RequiredEvidence  []string   `json:"required_evidence"`
	Confirmation      string     `json:"confirmation"`
	ResultBudgetBytes int64      `json:"result_budget_bytes,omitempty"`
	AllowSampling     bool       `json:"allow_sampling,omitempty"`
}

// Downstream is the JSON form of [registryv1.DownstreamMapping].
type Downstream struct {
	Destination string `json:"destination"`
	Operation   string `json:"operation"`
	Identity    string `json:"identity"`
}

// DataPolicy is the JSON form of [registryv1.DataPolicy].
type DataPolicy struct {
	Classification string `json:"classification"`
	PersonalData   bool   `json:"personal_data"`
	RetentionDays  int32  `json:"retention_days"`
}

// DefaultClassification is what an empty classification means.
const DefaultClassification = "internal"

// FromProto returns the normalized form of c: lists sorted and never nil,
// the default classification filled in. It does not validate; call
// [Validate] first.
func FromProto(c *registryv1.ToolContract) Doc {
	d := Doc{
		ToolID:        c.GetToolId(),
		Effect:        c.GetEffect().String(),
		Scope:         c.GetScope(),
		Authorization: c.GetAuthorization().String(),
		DeadlineMS:    c.GetDeadlineMs(),
		DownstreamMapping: Downstream{
			Destination: c.GetDownstreamMapping().GetDestination(),
			Operation:   c.GetDownstreamMapping().GetOperation(),
			Identity:    c.GetDownstreamMapping().GetIdentity(),
		},
		DataPolicy: DataPolicy{
			Classification: c.GetDataPolicy().GetClassification(),
			PersonalData:   c.GetDataPolicy().GetPersonalData(),
			RetentionDays:  c.GetDataPolicy().GetRetentionDays(),
		},
		AllowedFields:     sortedSet(c.GetAllowedFields()),
		RequiredEvidence:  sortedSet(c.GetRequiredEvidence()),
		Confirmation:      c.GetConfirmation().String(),
		ResultBudgetBytes: c.GetResultBudgetBytes(),
		AllowSampling:     c.GetAllowSampling(),
	}
	if d.DataPolicy.Classification == "" {
		d.DataPolicy.Classification = DefaultClassification
	}
	return d
}

func sortedSet(in []string) []string {
	out := append([]string{}, in...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Proto returns d as the API message.
func (d Doc) Proto() *registryv1.ToolContract {
	return &registryv1.ToolContract{
		ToolId:        d.ToolID,
		Effect:        catalogv1.EffectClass(catalogv1.EffectClass_value[d.Effect]),
		Scope:         d.Scope,
		Authorization: registryv1.Authorization(registryv1.Authorization_value[d.Authorization]),
		DeadlineMs:    d.DeadlineMS,
		DownstreamMapping: &registryv1.DownstreamMapping{
			Destination: d.DownstreamMapping.Destination,
			Operation:   d.DownstreamMapping.Operation,
			Identity:    d.DownstreamMapping.Identity,
		},
		DataPolicy: &registryv1.DataPolicy{
			Classification: d.DataPolicy.Classification,
			PersonalData:   d.DataPolicy.PersonalData,
			RetentionDays:  d.DataPolicy.RetentionDays,
		},
		AllowedFields:     append([]string(nil), d.AllowedFields...),
		RequiredEvidence:  append([]string(nil), d.RequiredEvidence...),
		Confirmation:      registryv1.Confirmation(registryv1.Confirmation_value[d.Confirmation]),
		ResultBudgetBytes: d.ResultBudgetBytes,
		AllowSampling:     d.AllowSampling,
	}
}

// Marshal returns the JSON the registry stores for d.
func (d Doc) Marshal() ([]byte, error) { return json.Marshal(d) }

// Unmarshal parses stored JSON.
func Unmarshal(b []byte) (Doc, error) {
	var d Doc
	if err := json.Unmarshal(b, &d); err != nil {
		return Doc{}, fmt.Errorf("contract: stored contract: %w", err)
	}
	d.AllowedFields = sortedSet(d.AllowedFields)
	d.RequiredEvidence = sortedSet(d.RequiredEvidence)
	return d, nil
}

// approvalInput is what an approval digest is computed over:
// `{"contract":<Doc>,"descriptor_digest":"sha256:…"}`.
type approvalInput struct {
	DescriptorDigest string `json:"descriptor_digest"`
	Contract         Doc    `json:"contract"`
}

// ApprovalDigest returns `sha256:<hex>` of the RFC 8785 canonical JSON of
// {descriptor_digest, contract} (I5). Any change to either gives a new
// digest.
func ApprovalDigest(descriptorDigest string, d Doc) (string, error) {
	in := approvalInput{DescriptorDigest: descriptorDigest, Contract: d}
	in.Contract.AllowedFields = sortedSet(d.AllowedFields)
	in.Contract.RequiredEvidence = sortedSet(d.RequiredEvidence)
	return canonical.DigestValue(in)
}

// classPattern is a data classification (`pii`, `internal`), not an
// audience class.
var classPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Limits on contract fields.
const (
	MaxDeadlineMS = 600_000
	// MinResultBudgetBytes and MaxResultBudgetBytes bound a set
	// result_budget_bytes (1 KiB, the gateway's smallest budget, and 64 MiB).
	MinResultBudgetBytes = 1 << 10
	MaxResultBudgetBytes = 64 << 20
	MaxRetentionDays     = 3650
	maxText              = 512
	maxFieldName         = 256
)

// CheckToolID adds a violation to v when id is not a well-formed tool id
// ([ids.ValidToolID]).
func CheckToolID(v *apierror.Violations, field, id string) {
	switch {
	case id == "":
		v.Add(field, "required")
	case !ids.ValidToolID(id):
		v.Add(field, "must be %s", ids.ToolIDSyntax)
	}
}

// Validate checks c against the tool's current descriptor (its raw MCP
// tool JSON; nil when unknown) and returns one violation per problem, with
// field paths under prefix (e.g. `contract`). It checks that:
//   - effect, scope and authorization are present and known;
//   - every list entry is a non-empty name given once;
//   - required_evidence ⊆ allowed_fields when allowed_fields is set;
//   - allowed_fields, when set, keeps every property the descriptor's
//     outputSchema marks required (a projection must not break the
//     tool's own output contract);
//   - numbers and free text are within their limits.
func Validate(prefix string, c *registryv1.ToolContract, descriptorRaw []byte) apierror.Violations {
	var v apierror.Violations
	f := func(name string) string { return prefix + "." + name }
	CheckToolID(&v, f("tool_id"), c.GetToolId())
	if e := c.GetEffect(); e == catalogv1.EffectClass_EFFECT_CLASS_UNSPECIFIED {
		v.Add(f("effect"), "required: one of READ_ONLY, RESERVATION, WRITE, DESTRUCTIVE")
	} else if _, ok := catalogv1.EffectClass_name[int32(e)]; !ok {
		v.Add(f("effect"), "unknown effect class %d", e)
	}
	switch s := c.GetScope(); {
	case s == "":
		v.Add(f("scope"), "required, e.g. shipment:read")
	case !ids.ValidScope(s):
		v.Add(f("scope"), "must match %s", ids.ScopePattern)
	}
	if a := c.GetAuthorization(); a == registryv1.Authorization_AUTHORIZATION_UNSPECIFIED {
		v.Add(f("authorization"), "required: one of CALLER_AND_TENANT, CALLER, SERVICE")
	} else if _, ok := registryv1.Authorization_name[int32(a)]; !ok {
		v.Add(f("authorization"), "unknown authorization %d", a)
	}
	if _, ok := registryv1.Confirmation_name[int32(c.GetConfirmation())]; !ok {
		v.Add(f("confirmation"), "unknown confirmation %d", c.GetConfirmation())
	}
	if d := c.GetDeadlineMs(); d < 0 || d > MaxDeadlineMS {
		v.Add(f("deadline_ms"), "must be between 0 (platform default) and %d", MaxDeadlineMS)
	}
	if b := c.GetResultBudgetBytes(); b != 0 && (b < MinResultBudgetBytes || b > MaxResultBudgetBytes) {
		v.Add(f("result_budget_bytes"), "must be 0 (the gateway's default) or between %d and %d", MinResultBudgetBytes, MaxResultBudgetBytes)
	}
	dm := c.GetDownstreamMapping()
	checkText(&v, f("downstream_mapping.destination"), dm.GetDestination())
	checkText(&v, f("downstream_mapping.operation"), dm.GetOperation())
	checkText(&v, f("downstream_mapping.identity"), dm.GetIdentity())
	dp := c.GetDataPolicy()
	if cl := dp.GetClassification(); cl != "" && !classPattern.MatchString(cl) {
		v.Add(f("data_policy.classification"), "must match [a-z][a-z0-9_-]{0,31}, e.g. internal, confidential")
	}
	if r := dp.GetRetentionDays(); r < 0 || r > MaxRetentionDays {
		v.Add(f("data_policy.retention_days"), "must be between 0 and %d", MaxRetentionDays)
	}
	allowed := checkNames(&v, f("allowed_fields"), c.GetAllowedFields())
	checkNames(&v, f("required_evidence"), c.GetRequiredEvidence())
	if len(allowed) > 0 {
		for i, name := range c.GetRequiredEvidence() {
			if name != "" && !allowed[name] {
				v.Add(fmt.Sprintf("%s[%d]", f("required_evidence"), i),
					"%s is not in allowed_fields: the projection would remove evidence the contract requires", apierror.Echo(name))
			}
		}
		for _, name := range OutputRequired(descriptorRaw) {
			if !allowed[name] {
				v.Add(f("allowed_fields"), "drops %s, which the tool's outputSchema marks required", apierror.Echo(name))
			}
		}
	}
	return v
}

// checkNames checks a list of field names and returns the valid ones.
func checkNames(v *apierror.Violations, field string, names []string) map[string]bool {
	seen := map[string]bool{}
	for i, n := range names {
		at := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case n == "":
			v.Add(at, "empty field name")
		case len(n) > maxFieldName:
			v.Add(at, "longer than %d bytes", maxFieldName)
		case strings.IndexFunc(n, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			v.Add(at, "contains white space or a control character")
		case seen[n]:
			v.Add(at, "%s is given twice", apierror.Echo(n))
		default:
			seen[n] = true
		}
	}
	return seen
}

func checkText(v *apierror.Violations, field, s string) {
	if len(s) > maxText {
		v.Add(field, "longer than %d bytes", maxText)
	} else if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		v.Add(field, "contains a control character")
	}
}

// OutputRequired returns the top-level property names the tool's
// outputSchema marks required, in order, from the raw MCP tool JSON. It
// returns nil when there is no outputSchema or it is not an object with a
// `required` array of strings; descriptors are validated by discovery, and
// this reader only refuses to guess.
func OutputRequired(descriptorRaw []byte) []string {
	if len(descriptorRaw) == 0 {
		return nil
	}
	var tool struct {
		OutputSchema *struct {
			Required []json.RawMessage `json:"required"`
		} `json:"outputSchema"`
	}
	if err := json.Unmarshal(descriptorRaw, &tool); err != nil || tool.OutputSchema == nil {
		return nil
	}
	var out []string
	for _, r := range tool.OutputSchema.Required {
		var s string
		if json.Unmarshal(r, &s) == nil && s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
