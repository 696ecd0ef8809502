package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
)

// contractFile is the YAML (or JSON) form of a contract for `contract
// publish --file`; enum values may be short (`read-only`) or full
// (`EFFECT_CLASS_READ_ONLY`). Unknown keys are refused.
type contractFile struct {
	ToolID            string   `yaml:"tool_id"`
	Effect            string   `yaml:"effect,omitempty"`
	Scope             string   `yaml:"scope,omitempty"`
	Authorization     string   `yaml:"authorization,omitempty"`
	DeadlineMS        int32    `yaml:"deadline_ms,omitempty"`
	Confirmation      string   `yaml:"confirmation,omitempty"`
	AllowedFields     []string `yaml:"allowed_fields,omitempty"`
	RequiredEvidence  []string `yaml:"required_evidence,omitempty"`
	ResultBudgetBytes int64    `yaml:"result_budget_bytes,omitempty"`
	AllowSampling     bool     `yaml:"allow_sampling,omitempty"`
	DownstreamMapping struct {
		Destination string `yaml:"destination,omitempty"`
		Operation   string `yaml:"operation,omitempty"`
		Identity    string `yaml:"identity,omitempty"`
	} `yaml:"downstream_mapping,omitempty"`
	DataPolicy struct {
		Classification string `yaml:"classification,omitempty"`
		PersonalData   bool   `yaml:"personal_data,omitempty"`
		RetentionDays  int32  `yaml:"retention_days,omitempty"`
	} `yaml:"data_policy,omitempty"`
}

func readContractFile(path string) (contractFile, error) {
	var f contractFile
	b, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// toProto builds the contract; tool is the positional tool id.
func (f contractFile) toProto(tool string) (*registryv1.ToolContract, error) {
	if f.ToolID != "" && f.ToolID != tool {
		return nil, fmt.Errorf("the file is for tool %q, not %q", f.ToolID, tool)
	}
	effect, err := parseEnum("effect", f.Effect, "EFFECT_CLASS_", catalogv1.EffectClass_value)
	if err != nil {
		return nil, err
	}
	auth, err := parseEnum("authorization", f.Authorization, "AUTHORIZATION_", registryv1.Authorization_value)
	if err != nil {
		return nil, err
	}
	conf, err := parseEnum("confirmation", f.Confirmation, "CONFIRMATION_", registryv1.Confirmation_value)
	if err != nil {
		return nil, err
	}
	return &registryv1.ToolContract{
		ToolId: tool, Effect: catalogv1.EffectClass(effect), Scope: f.Scope, Authorization: registryv1.Authorization(auth),
		DeadlineMs: f.DeadlineMS, Confirmation: registryv1.Confirmation(conf),
		AllowedFields: f.AllowedFields, RequiredEvidence: f.RequiredEvidence, ResultBudgetBytes: f.ResultBudgetBytes,
		AllowSampling: f.AllowSampling,
		DownstreamMapping: &registryv1.DownstreamMapping{Destination: f.DownstreamMapping.Destination,
			Operation: f.DownstreamMapping.Operation, Identity: f.DownstreamMapping.Identity},
		DataPolicy: &registryv1.DataPolicy{Classification: f.DataPolicy.Classification,
			PersonalData: f.DataPolicy.PersonalData, RetentionDays: f.DataPolicy.RetentionDays},
	}, nil
}

// overrides records contract flags given on the command line, which
// override the file's values.
type overrides map[string]func(*contractFile)

func (o overrides) str(fs *pflag.FlagSet, name, usage string, apply func(*contractFile, string)) {
	fs.Func(name, usage, func(v string) error {
		o[name] = func(f *contractFile) { apply(f, v) }
		return nil
	})
}

func (o overrides) num(fs *pflag.FlagSet, name, usage string, apply func(*contractFile, int32)) {
	fs.Func(name, usage, func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("not a number: %q", v)
		}
		o[name] = func(f *contractFile) { apply(f, int32(n)) }
		return nil
	})
}

func (o overrides) num64(fs *pflag.FlagSet, name, usage string, apply func(*contractFile, int64)) {
	fs.Func(name, usage, func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not a number: %q", v)
		}
		o[name] = func(f *contractFile) { apply(f, n) }
		return nil
	})
}

func (o overrides) boolean(fs *pflag.FlagSet, name, usage string, apply func(*contractFile, bool)) {
	fs.BoolFunc(name, usage, func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not true or false: %q", v)
		}
		o[name] = func(f *contractFile) { apply(f, b) }
		return nil
	})
}

func (o overrides) list(fs *pflag.FlagSet, name, usage string, apply func(*contractFile, []string)) {
	var l listFlag
	fs.Func(name, usage, func(v string) error {
		if err := l.Set(v); err != nil {
			return err
		}
		o[name] = func(f *contractFile) { apply(f, l) }
		return nil
	})
}

// contractCommand is `toolcrib contract publish`.
func contractCommand(e *env) *cobra.Command {
	var file string
	set := overrides{}
	return withFlags(&cobra.Command{
		Use: "publish <tool-id>",
		Short: "publish a contract for a discovered tool (its owner or an admin), from --file (YAML or JSON) and/or flags; " +
			"flags override the file. The tool becomes unreviewed until its new approval digest is approved",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<tool-id>"); err != nil {
				return err
			}
			var f contractFile
			if file != "" {
				var err error
				if f, err = readContractFile(file); err != nil {
					return err
				}
			}
			for _, apply := range set {
				apply(&f)
			}
			c, err := f.toProto(a[0])
			if err != nil {
				return err
			}
			resp, err := callRegistry(ctx, e, func(ctx context.Context, rc registryv1.RegistryServiceClient) (*registryv1.PublishContractResponse, error) {
				return rc.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c})
			})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				printTool(w, resp.GetTool())
				fmt.Fprintf(w, "\nnext: review it with `toolcrib tool show %s`, then approve exactly the digest of each "+
					"descriptor you reviewed:\n", a[0])
				for _, d := range approvalCandidates(resp.GetTool()) {
					fmt.Fprintf(w, "  toolcrib tool approve %s %s\n", a[0], d)
				}
			})
		},
	}, func(fs *pflag.FlagSet) { contractFlags(fs, &file, set) })
}

// contractFlags are the flags of `contract publish`: --file, and one flag
// per contract field, recorded in set to override the file's value.
func contractFlags(fs *pflag.FlagSet, file *string, set overrides) {
	fs.StringVar(file, "file", "", "contract file, YAML or JSON, with the keys of the flags below (tool_id, effect, scope, "+
		"authorization, deadline_ms, confirmation, allowed_fields, required_evidence, result_budget_bytes, allow_sampling, downstream_mapping{destination, "+
		"operation, identity}, data_policy{classification, personal_data, retention_days})")
	set.str(fs, "effect", "effect class: read-only, reservation, write or destructive", func(f *contractFile, v string) { f.Effect = v })
	set.str(fs, "scope", "scope a caller must hold, e.g. shipment:read", func(f *contractFile, v string) { f.Scope = v })
	set.str(fs, "authorization", "whose authority the call runs with: caller-and-tenant, caller or service",
		func(f *contractFile, v string) { f.Authorization = v })
	set.num(fs, "deadline-ms", "deadline of one call in milliseconds; 0 for the platform default",
		func(f *contractFile, v int32) { f.DeadlineMS = v })
	set.str(fs, "confirmation", "autonomous-allowed or always; empty for the default (WRITE and DESTRUCTIVE need it)",
		func(f *contractFile, v string) { f.Confirmation = v })
	set.list(fs, "allowed-fields", "result fields that may reach the agent (comma-separated or repeated); none means all",
		func(f *contractFile, v []string) { f.AllowedFields = v })
	set.list(fs, "required-evidence", "result fields a result must carry as evidence; must be allowed fields",
		func(f *contractFile, v []string) { f.RequiredEvidence = v })
	set.num64(fs, "result-budget", "largest result in bytes given to the model inline, 1024 to 67108864; larger ones go to the "+
		"gateway's artifact store; 0 for the gateway's default", func(f *contractFile, v int64) { f.ResultBudgetBytes = v })
	set.boolean(fs, "allow-sampling", "let the tool's server ask the calling client for a sampling (sampling/createMessage, "+
		"an LLM completion on the client's model) during a call through the gateway; off by default; part of the approval digest",
		func(f *contractFile, v bool) { f.AllowSampling = v })
	set.str(fs, "destination", "downstream system, e.g. shipments-api",
		func(f *contractFile, v string) { f.DownstreamMapping.Destination = v })
	set.str(fs, "operation", "downstream operation, e.g. 'GET /shipments/{id}'",
		func(f *contractFile, v string) { f.DownstreamMapping.Operation = v })
	set.str(fs, "identity", "identity presented downstream; empty for the caller's",
		func(f *contractFile, v string) { f.DownstreamMapping.Identity = v })
	set.str(fs, "classification", "data classification of results; empty means internal",
		func(f *contractFile, v string) { f.DataPolicy.Classification = v })
	set.str(fs, "personal-data", "true when results may contain personal data", func(f *contractFile, v string) {
		f.DataPolicy.PersonalData, _ = strconv.ParseBool(v)
	})
	set.num(fs, "retention-days", "how long results may be kept, in days",
		func(f *contractFile, v int32) { f.DataPolicy.RetentionDays = v })
}

// samplingText says whether a contract lets its tool's server ask the
// client for a sampling through the gateway.
func samplingText(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "refused"
}

// toolResponse is a response carrying the tool after a review action.
type toolResponse interface {
	proto.Message
	GetTool() *registryv1.Tool
}

// toolAction runs a review action and prints the tool after it.
func toolAction(ctx context.Context, e *env, call func(context.Context, registryv1.RegistryServiceClient) (toolResponse, error)) error {
	resp, err := callRegistry(ctx, e, call)
	if err != nil {
		return err
	}
	return e.output(resp, func(w *tabwriter.Writer) { printTool(w, resp.GetTool()) })
}

func contractVersion(t *registryv1.Tool) string {
	if t.GetContractVersion() == 0 {
		return "-"
	}
	return "v" + strconv.FormatInt(t.GetContractVersion(), 10)
}

func versionOrDash(v int64) string {
	if v == 0 {
		return "-"
	}
	return "v" + strconv.FormatInt(v, 10)
}

// safeText quotes text from MCP servers (untrusted) when it holds anything
// a terminal could interpret.
func safeText(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }) {
		return strconv.Quote(s)
	}
	return s
}

func printTool(w io.Writer, t *registryv1.Tool) {
	fmt.Fprintf(w, "tool\t%s\n", t.GetToolId())
	fmt.Fprintf(w, "owner\t%s\n", t.GetOwner())
	fmt.Fprintf(w, "review state\t%s\n", enumName(t.GetReviewState().String(), "REVIEW_STATE_"))
	enabled := yesNo(t.GetEnabled())
	if !t.GetEnabled() && t.GetDisabledReason() != "" {
		enabled += " (" + safeText(t.GetDisabledReason()) + ")"
	}
	fmt.Fprintf(w, "enabled\t%s\n", enabled)
	fmt.Fprintf(w, "present at source\t%s\n", yesNo(t.GetPresentAtSource()))
	var desc struct {
		Description string `json:"description"`
	}
	if json.Unmarshal(t.GetDescriptorRaw(), &desc) == nil && desc.Description != "" {
		fmt.Fprintf(w, "description\t%s\n", strconv.Quote(desc.Description))
	}
	fmt.Fprintf(w, "descriptor digest\t%s\n", orDash(t.GetDescriptorDigest()))
	fmt.Fprintf(w, "approval digest\t%s\n", orDash(t.GetApprovalDigest()))
	if c := t.GetContract(); c != nil {
		fmt.Fprintf(w, "contract\tv%d: effect %s, scope %s, authorization %s, deadline %s\n", t.GetContractVersion(),
			effectName(c.GetEffect()), c.GetScope(), enumName(c.GetAuthorization().String(), "AUTHORIZATION_"), deadlineText(c.GetDeadlineMs()))
		fmt.Fprintf(w, "\tallowed fields %s, required evidence %s\n", allowedFieldsText(c.GetAllowedFields()), requiredEvidenceText(c.GetRequiredEvidence()))
		fmt.Fprintf(w, "\tresult budget %s, sampling %s\n", resultBudgetText(c.GetResultBudgetBytes()), samplingText(c.GetAllowSampling()))
		if dm := c.GetDownstreamMapping(); dm.GetDestination() != "" || dm.GetOperation() != "" || dm.GetIdentity() != "" {
			fmt.Fprintf(w, "\tdownstream %s %s as %s\n", orDash(dm.GetDestination()), orDash(dm.GetOperation()), orDash(dm.GetIdentity()))
		}
		dp := c.GetDataPolicy()
		fmt.Fprintf(w, "\tdata %s, personal data %s, kept %d days, confirmation %s\n", dp.GetClassification(), yesNo(dp.GetPersonalData()),
			dp.GetRetentionDays(), enumName(c.GetConfirmation().String(), "CONFIRMATION_"))
	} else {
		fmt.Fprintf(w, "contract\tnone published yet (`toolcrib contract publish %s ...`)\n", t.GetToolId())
	}
	for i, a := range t.GetApprovals() {
		label := ""
		if i == 0 {
			label = "approvals"
		}
		fmt.Fprintf(w, "%s\t%s v%d by %s at %s (descriptor %s)\n", label, a.GetApprovalDigest(), a.GetContractVersion(),
			a.GetApprovedBy(), when(a.GetApprovedAt()), shortDigest(a.GetDescriptorDigest()))
	}
	printVariants(w, t)
}

// printVariants prints which audience class sees which descriptor of the
// tool, and where each stands in review: review is per descriptor.
func printVariants(w io.Writer, t *registryv1.Tool) {
	if len(t.GetVariants()) == 0 {
		return
	}
	fmt.Fprintln(w, "\nCLASS\tREVIEW STATE\tAT SOURCE\tGENERATION\tDESCRIPTOR DIGEST\tAPPROVAL DIGEST\tDESCRIPTION")
	for _, v := range t.GetVariants() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", v.GetAudienceClass(), enumName(v.GetReviewState().String(), "REVIEW_STATE_"),
			yesNo(v.GetPresentAtSource()), v.GetGeneration(), shortDigest(v.GetDescriptorDigest()), orDash(v.GetApprovalDigest()),
			descriptionOf(v.GetDescriptorRaw()))
	}
}

// maxShownDescription bounds a description in a table, in runes.
const maxShownDescription = 80

// descriptionOf returns the quoted, shortened description of a raw tool
// descriptor (untrusted text from an MCP server); `-` when it has none.
func descriptionOf(raw []byte) string {
	var desc struct {
		Description string `json:"description"`
	}
	if json.Unmarshal(raw, &desc) != nil || desc.Description == "" {
		return "-"
	}
	d := []rune(desc.Description)
	if len(d) > maxShownDescription {
		return strconv.Quote(string(d[:maxShownDescription])) + "…"
	}
	return strconv.Quote(desc.Description)
}

// allowedFieldsText says what a contract's allowed fields mean: an empty
// list is no projection, every result field reaches the agent.
func allowedFieldsText(fields []string) string {
	if len(fields) == 0 {
		return "all (no projection: every result field reaches the agent)"
	}
	return "[" + strings.Join(fields, ", ") + "] (only these result fields reach the agent)"
}

// requiredEvidenceText says what a contract's required evidence means.
func requiredEvidenceText(fields []string) string {
	if len(fields) == 0 {
		return "none"
	}
	return "[" + strings.Join(fields, ", ") + "]"
}

// incompleteDigest is the error for an approval digest that is not
// `sha256:` and 64 hex digits, e.g. one copied from a table that cut it
// short: approving needs the whole digest. When the text is the start of a
// digest the tool is waiting for, the error prints that digest in full to
// copy (it never approves a digest the caller did not give whole).
func incompleteDigest(ctx context.Context, e *env, toolID, given string) error {
	prefix := strings.TrimRight(strings.TrimSpace(given), ".…")
	msg := fmt.Sprintf("%q is not a full approval digest: approving needs all of it, `sha256:` and 64 hex digits, as `toolcrib tool show %s` prints it",
		boundedArg(given), toolID)
	if len(prefix) <= len(canonical.DigestPrefix) || !strings.HasPrefix(prefix, canonical.DigestPrefix) {
		return errors.New(msg)
	}
	resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.GetToolResponse, error) {
		return c.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
	})
	if err != nil {
		return errors.New(msg)
	}
	var match []string
	for _, d := range approvalCandidates(resp.GetTool()) {
		if strings.HasPrefix(d, prefix) {
			match = append(match, d)
		}
	}
	if len(match) == 1 {
		msg += fmt.Sprintf("; the digest awaiting approval that starts so is\n  %s", match[0])
	}
	return errors.New(msg)
}

// boundedArg cuts caller input for an error message.
func boundedArg(s string) string {
	const limit = 80
	if r := []rune(s); len(r) > limit {
		return string(r[:limit]) + "…"
	}
	return s
}

// approvalCandidates returns the approval digests of the variants not yet
// approved, each once, in class order; the tool's own digest when it has
// no variants.
func approvalCandidates(t *registryv1.Tool) []string {
	var out []string
	for _, v := range t.GetVariants() {
		if d := v.GetApprovalDigest(); d != "" && v.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	if len(out) == 0 && len(t.GetVariants()) == 0 && t.GetApprovalDigest() != "" {
		out = append(out, t.GetApprovalDigest())
	}
	return out
}

// variantsApproved is `approved/total` over the tool's variants.
func variantsApproved(t *registryv1.Tool) string {
	n := 0
	for _, v := range t.GetVariants() {
		if v.GetReviewState() == registryv1.ReviewState_REVIEW_STATE_APPROVED {
			n++
		}
	}
	return fmt.Sprintf("%d/%d", n, len(t.GetVariants()))
}

func resultBudgetText(n int64) string {
	if n == 0 {
		return "gateway default"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

func deadlineText(ms int32) string {
	if ms == 0 {
		return "platform default"
	}
	return strconv.Itoa(int(ms)) + "ms"
}

// toolRollbackCommand is `toolcrib tool rollback`.
func toolRollbackCommand(e *env) *cobra.Command {
	var reason string
	return withFlags(&cobra.Command{
		Use: "rollback <tool-id>",
		Short: "go back to the last approved contract: an unreviewed contract is replaced by the newest approved one; " +
			"an approved one has its approval withdrawn and the previous approval becomes current",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<tool-id>"); err != nil {
				return err
			}
			return toolAction(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (toolResponse, error) {
				return c.RollbackTool(ctx, &registryv1.RollbackToolRequest{ToolId: a[0], Reason: reason})
			})
		},
	}, func(fs *pflag.FlagSet) { fs.StringVar(&reason, "reason", "", "why; recorded in history") })
}

// toolDisableCommand is `toolcrib tool disable`.
func toolDisableCommand(e *env) *cobra.Command {
	var reason string
	return withFlags(&cobra.Command{
		Use:   "disable <tool-id>",
		Short: "the kill switch: admission denies every call to the tool from the policy epoch this bumps to",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<tool-id>"); err != nil {
				return err
			}
			return toolAction(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (toolResponse, error) {
				return c.DisableTool(ctx, &registryv1.DisableToolRequest{ToolId: a[0], Reason: reason})
			})
		},
	}, func(fs *pflag.FlagSet) { fs.StringVar(&reason, "reason", "", "why; shown in history and decisions") })
}

// toolEnableCommand is `toolcrib tool enable`.
func toolEnableCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "enable <tool-id>",
		Short: "let admission allow calls to the tool's approved version (the tool's owner or an admin)",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<tool-id>"); err != nil {
				return err
			}
			return toolAction(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (toolResponse, error) {
				return c.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: a[0]})
			})
		},
	}
}

// toolApproveCommand is `toolcrib tool approve`.
func toolApproveCommand(e *env) *cobra.Command {
	var comment string
	return withFlags(&cobra.Command{
		Use:   "approve <tool-id> <approval-digest>",
		Short: "approve the exact approval digest you reviewed (the tool's owner or an admin); a digest that is no longer current is refused",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 2, "<tool-id> <approval-digest>"); err != nil {
				return err
			}
			if !canonical.ValidDigest(a[1]) {
				return incompleteDigest(ctx, e, a[0], a[1])
			}
			return toolAction(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (toolResponse, error) {
				return c.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: a[0], ApprovalDigest: a[1], Comment: comment})
			})
		},
	}, func(fs *pflag.FlagSet) { fs.StringVar(&comment, "comment", "", "your review note") })
}

// toolShowCommand is `toolcrib tool show`.
func toolShowCommand(e *env) *cobra.Command {
	var noHistory bool
	return withFlags(&cobra.Command{
		Use: "show <tool-id>",
		Short: "show a tool: its variants (which audience class sees which descriptor, with the exact approval digest to " +
			"approve and the review state of each), its contract, approvals and history",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<tool-id>"); err != nil {
				return err
			}
			resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.GetToolResponse, error) {
				return c.GetTool(ctx, &registryv1.GetToolRequest{ToolId: a[0], IncludeHistory: !noHistory})
			})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				printTool(w, resp.GetTool())
				if len(resp.GetHistory()) > 0 {
					fmt.Fprintln(w, "\nREV\tAT\tEVENT\tBY\tCONTRACT\tAPPROVAL DIGEST\tDETAIL\tCLASS")
					for _, h := range resp.GetHistory() {
						fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.GetRevision(), when(h.GetAt()), h.GetKind(), h.GetActor(),
							versionOrDash(h.GetContractVersion()), shortDigest(h.GetApprovalDigest()), orDash(safeText(h.GetDetail())),
							orDash(h.GetAudienceClass()))
					}
				}
			})
		},
	}, func(fs *pflag.FlagSet) { fs.BoolVar(&noHistory, "no-history", false, "leave out the history") })
}

// toolListCommand is `toolcrib tool list`.
func toolListCommand(e *env) *cobra.Command {
	var server, state string
	return withFlags(&cobra.Command{
		Use:   "list",
		Short: "list tools, optionally of one server or in one review state (pending, unreviewed, approved)",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 0, "no arguments"); err != nil {
				return err
			}
			if state == "pending" {
				state = "pending-contract"
			}
			st, err := parseEnum("--state", state, "REVIEW_STATE_", registryv1.ReviewState_value)
			if err != nil {
				return err
			}
			all := &registryv1.ListToolsResponse{}
			for {
				resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.ListToolsResponse, error) {
					return c.ListTools(ctx, &registryv1.ListToolsRequest{ServerId: server, ReviewState: registryv1.ReviewState(st),
						PageToken: all.GetNextPageToken()})
				})
				if err != nil {
					return err
				}
				all.Tools, all.NextPageToken, all.Revision = append(all.Tools, resp.GetTools()...), resp.GetNextPageToken(), resp.GetRevision()
				if all.NextPageToken == "" {
					break
				}
			}
			return e.output(all, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "TOOL\tSTATE\tENABLED\tAT SOURCE\tCONTRACT\tAPPROVAL DIGEST\tVARIANTS APPROVED")
				for _, t := range all.GetTools() {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.GetToolId(), enumName(t.GetReviewState().String(), "REVIEW_STATE_"),
						yesNo(t.GetEnabled()), yesNo(t.GetPresentAtSource()), contractVersion(t), orDash(t.GetApprovalDigest()),
						variantsApproved(t))
				}
				fmt.Fprintf(w, "(%d tools, registry revision %d)\n", len(all.GetTools()), all.GetRevision())
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&server, "server", "", "only tools of this server")
		fs.StringVar(&state, "state", "", "only tools in this review state: pending (no contract), unreviewed or approved")
	})
}

// toolGroup is `toolcrib tool …`.
func toolGroup(e *env) *cobra.Command {
	return group("tool", "review discovered tools: list, show, approve, enable, disable (the kill switch), roll back",
		toolListCommand(e), toolShowCommand(e), toolApproveCommand(e), toolEnableCommand(e), toolDisableCommand(e), toolRollbackCommand(e))
}

// contractGroup is `toolcrib contract …`.
func contractGroup(e *env) *cobra.Command {
	return group("contract", "publish tool contracts", contractCommand(e))
}
