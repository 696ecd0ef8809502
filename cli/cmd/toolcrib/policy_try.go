package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/structpb"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/condition"
)

// policyTry is what `toolcrib policy test` asks: a principal, a tool and
// the call's arguments and request.
type policyTry struct {
	subject         string
	groups          listFlag
	claims          listFlag
	tool, class     string
	argsJSON, runID string
	mode, at        string
}

func (t *policyTry) flags(fs *pflag.FlagSet) {
	fs.StringVar(&t.subject, "subject", "", "the principal's subject (token sub)")
	fs.Var(&t.groups, "group", "a group of the principal (repeat or comma-separate)")
	fs.Var(&t.claims, "claim", "a token claim the conditions may read as principal.claims, name=value (repeat)")
	fs.StringVar(&t.tool, "tool", "", "the tool id, <server_id>.<tool name>; required")
	fs.StringVar(&t.class, "audience", "", "the audience class the tool is read through; empty: the first of the tenant's classes that reads the tool's server and that the principal's grants give")
	fs.StringVar(&t.argsJSON, "args", "{}", "the call's arguments, a JSON object")
	fs.StringVar(&t.runID, "run-id", "", "the run id the host declared (request.run_id)")
	fs.StringVar(&t.mode, "mode", "autonomous", "request.mode: autonomous or user-confirmed")
	fs.StringVar(&t.at, "time", "", "request.time, RFC 3339; empty: now")
}

// Verdict texts of `policy test`, named once.
const (
	tryAdmitted       = "admitted"
	tryNoScope        = "no grant of the principal gives scope %s (Check: FORBIDDEN)"
	tryNoClass        = "no grant of the principal gives an audience class reading server %s (Check: NOT_FOUND)"
	tryConditionUnmet = "not admitted: the condition of grant %s is not met (Check: CONDITION_UNMET)"
	tryConditionError = "not admitted: the condition of grant %s could not be evaluated (Check: CONDITION_UNMET, fail closed)"
)

var verdictNames = map[condition.Verdict]string{
	condition.NotNeeded: "not needed", condition.Irrelevant: "gives neither scope nor class",
	condition.Holds: "true", condition.Unmet: "false", condition.Failed: "error",
}

// policyTestCommand is `toolcrib policy test`.
func policyTestCommand(e *env) *cobra.Command {
	t := &policyTry{}
	return withFlags(&cobra.Command{
		Use:   "test <tenant-id>",
		Short: "evaluate a tenant's grants and their conditions for a principal, a tool and arguments, calling nothing",
		Long: "Reads the tenant's policy and the tool's contract from the registry and evaluates, as Check would after " +
			"its other rules, which grant admits the call or why none does. Nothing is called and no receipt is made. " +
			"A negative answer is an answer, not an error (exit 0).",
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := needArgs(a, 1, "<tenant-id>"); err != nil {
				return err
			}
			in, err := t.input(a[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			pol, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.GetPolicyResponse, error) {
				return c.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: a[0]})
			})
			if err != nil {
				return err
			}
			tool, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.GetToolResponse, error) {
				return c.GetTool(ctx, &registryv1.GetToolRequest{ToolId: t.tool})
			})
			if err != nil {
				return err
			}
			res := t.evaluate(pol.GetPolicy(), tool.GetTool(), in)
			return e.output(res.proto(), res.print)
		},
	}, t.flags)
}

// input builds what the conditions read, from the flags.
func (t *policyTry) input(tenant string) (*condition.Input, error) {
	if t.tool == "" {
		return nil, errors.New("--tool is required")
	}
	if t.subject == "" && len(t.groups) == 0 {
		return nil, errors.New("give --subject or --group")
	}
	in := &condition.Input{Principal: condition.Principal{Subject: t.subject, Tenant: tenant, Groups: t.groups}}
	for _, c := range t.claims {
		k, v, ok := strings.Cut(c, "=")
		if !ok || k == "" {
			return nil, errors.New("--claim must be name=value")
		}
		if in.Principal.Claims == nil {
			in.Principal.Claims = map[string]string{}
		}
		in.Principal.Claims[k] = v
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(t.argsJSON)))
	dec.UseNumber()
	if err := dec.Decode(&in.Args); err != nil || in.Args == nil || dec.More() {
		return nil, errors.New("--args must be one JSON object")
	}
	switch t.mode {
	case "autonomous":
		in.Request.Mode = "AUTONOMOUS"
	case "user-confirmed":
		in.Request.Mode = "USER_CONFIRMED"
	default:
		return nil, errors.New("--mode must be autonomous or user-confirmed")
	}
	in.Request.RunID = t.runID
	in.Request.Time = time.Now().UTC()
	if t.at != "" {
		at, err := time.Parse(time.RFC3339, t.at)
		if err != nil {
			return nil, errors.New("--time must be RFC 3339, e.g. 2026-12-02T08:00:00Z")
		}
		in.Request.Time = at
	}
	return in, nil
}

// tryResult is the answer of `policy test`.
type tryResult struct {
	tool, scope, class string
	rows               []tryRow
	admitted           bool
	admitting, verdict string
}

type tryRow struct{ grant, condition, verdict string }

// evaluate runs the one rule of conditions (condition.Admit) over the
// grants naming the principal, after the checks of scope and class Check
// makes before it.
func (t *policyTry) evaluate(p *registryv1.Policy, tool *registryv1.Tool, in *condition.Input) tryResult {
	c := tool.GetContract()
	res := tryResult{tool: t.tool, scope: c.GetScope()}
	in.Tool = condition.Tool{ID: tool.GetToolId(), Server: tool.GetServerId(), Effect: strings.TrimPrefix(c.GetEffect().String(), "EFFECT_CLASS_"),
		ApprovalDigest: tool.GetApprovalDigest()}
	if c.GetScope() != "" {
		in.Tool.Scopes = []string{c.GetScope()}
	}
	var cands []condition.Candidate
	var scopes, classes []string
	for _, g := range p.GetGrants() {
		if !(g.GetSubject() != "" && g.GetSubject() == in.Principal.Subject) && !(g.GetGroup() != "" && slices.Contains(in.Principal.Groups, g.GetGroup())) {
			continue
		}
		name := "subject:" + g.GetSubject()
		if g.GetGroup() != "" {
			name = "group:" + g.GetGroup()
		}
		cand := condition.Candidate{Name: name, Scopes: g.GetScopes(), Classes: g.GetAudienceClasses(), Text: g.GetCondition()}
		if cand.Text != "" {
			cand.Expr, _ = condition.Compile(cand.Text)
		}
		cands = append(cands, cand)
		scopes = append(scopes, g.GetScopes()...)
		classes = append(classes, g.GetAudienceClasses()...)
	}
	res.class = t.class
	if res.class == "" {
		for _, ac := range p.GetAudienceClasses() {
			reads := slices.ContainsFunc(ac.GetServers(), func(s *registryv1.AudienceServer) bool { return s.GetServerId() == tool.GetServerId() })
			if reads && slices.Contains(classes, ac.GetName()) {
				res.class = ac.GetName()
				break
			}
		}
	}
	switch {
	case res.class == "" || !slices.Contains(classes, res.class):
		res.verdict = fmt.Sprintf(tryNoClass, tool.GetServerId())
		return res
	case c.GetScope() == "" || !slices.Contains(scopes, c.GetScope()):
		res.verdict = fmt.Sprintf(tryNoScope, orDash(c.GetScope()))
		return res
	}
	r := condition.Admit(cands, c.GetScope(), res.class, in, func(c condition.Candidate, v condition.Verdict) {
		cond := c.Text
		if cond == "" {
			cond = "-"
			v = condition.NotNeeded
		}
		res.rows = append(res.rows, tryRow{grant: c.Name, condition: cond, verdict: verdictNames[v]})
	})
	res.admitted, res.admitting = r.Admitted, r.Admitting
	switch {
	case r.Admitted && r.Admitting == "":
		res.verdict = tryAdmitted + " by grants without a condition"
	case r.Admitted:
		res.verdict = tryAdmitted + " by the condition of grant " + r.Admitting
	case r.Failed:
		res.verdict = fmt.Sprintf(tryConditionError, r.Unmet)
	default:
		res.verdict = fmt.Sprintf(tryConditionUnmet, r.Unmet)
	}
	return res
}

func (r tryResult) print(w *tabwriter.Writer) {
	fmt.Fprintf(w, "tool\t%s\nscope\t%s\naudience class\t%s\n\n", r.tool, orDash(r.scope), orDash(r.class))
	if len(r.rows) > 0 {
		fmt.Fprintln(w, "GRANT\tCONDITION\tRESULT")
		for _, row := range r.rows {
			fmt.Fprintf(w, "%s\t%s\t%s\n", row.grant, oneLine(row.condition), row.verdict)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "verdict\t%s\n", r.verdict)
}

func (r tryResult) proto() *structpb.Struct {
	rows := make([]any, len(r.rows))
	for i, row := range r.rows {
		rows[i] = map[string]any{"grant": row.grant, "condition": row.condition, "result": row.verdict}
	}
	s, _ := structpb.NewStruct(map[string]any{"tool": r.tool, "scope": r.scope, "audience_class": r.class,
		"grants": rows, "admitted": r.admitted, "admitting_grant": r.admitting, "verdict": r.verdict})
	return s
}

// oneLine shows a multi-line condition on one table row.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
