package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// admissionClient dials the admission service.
func (e *env) admissionClient() (admissionv1.AdmissionServiceClient, error) {
	c, err := e.dial(e.admissionAddr)
	if err != nil {
		return nil, err
	}
	return admissionv1.NewAdmissionServiceClient(c), nil
}

// reasonName is a decision reason as the docs spell it, e.g. `STALE_POLICY`.
func reasonName(r catalogv1.DecisionReason) string {
	return strings.TrimPrefix(r.String(), "DECISION_REASON_")
}

// checkCommand is `toolcrib check`.
func checkCommand(e *env) *cobra.Command {
	req := &admissionv1.CheckRequest{}
	var argsJSON, mode, confirmer string
	return withFlags(&cobra.Command{
		Use:   "check <tool-id>",
		Short: "ask admission whether a call of a tool may start now: decision, reason, detail and receipt",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := needArgs(args, 1, "<tool-id>"); err != nil {
				return err
			}
			m, err := parseEnum("--mode", mode, "MODE_", admissionv1.Mode_value)
			if err != nil {
				return err
			}
			if !json.Valid([]byte(argsJSON)) {
				return fmt.Errorf("--args: not a JSON document")
			}
			req.ToolId, req.Mode, req.Arguments = args[0], admissionv1.Mode(m), []byte(argsJSON)
			confirm, err := confirmerCredentials(e, req.Mode, confirmer)
			if err != nil {
				return err
			}
			c, err := e.admissionClient()
			if err != nil {
				return err
			}
			cctx, cancel := e.callCtx(ctx)
			defer cancel()
			resp, err := c.Check(cctx, req, confirm...)
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) { printCheck(w, resp) })
		},
	}, func(fs *pflag.FlagSet) {
		fs.Int64Var(&req.Generation, "generation", 0, "generation the plan read the tool from (required)")
		fs.StringVar(&req.DescriptorDigest, "digest", "", "descriptor digest the plan read (required)")
		fs.Int64Var(&req.PolicyEpoch, "epoch", 0, "policy epoch the plan was built at; 0 for the current one")
		fs.StringVar(&argsJSON, "args", "{}", "the call's arguments, a JSON document")
		fs.StringVar(&mode, "mode", "autonomous", "who asked for the call: autonomous or user-confirmed (needs --confirmer-token)")
		fs.StringVar(&confirmer, "confirmer-token", "", "with --mode user-confirmed: the token of the confirmer asserting that the user confirmed "+
			"(the gateway's or a host runtime's service identity), sent beside the user's --token (env "+confirmerTokenEnv+")")
		fs.StringVar(&req.RunId, "run-id", "", "the agent run the call belongs to (binds the generation for the run)")
		fs.StringVar(&req.AudienceClass, "audience", "", "audience class the plan read the tool through; empty resolves it from the grants")
	})
}

// confirmerTokenEnv backs `check --confirmer-token`.
const confirmerTokenEnv = "TOOLCRIB_CONFIRMER_TOKEN"

// errNoConfirmer refuses `check --mode user-confirmed` without a confirmer
// token, before any call: a user's own token never carries a confirmation.
var errNoConfirmer = errors.New("--mode user-confirmed needs --confirmer-token (env " + confirmerTokenEnv + "): only a confirmer " +
	"(the gateway, or a host runtime acting for the user, with its own service identity) may assert that the user confirmed; " +
	"--token stays the user's")

// confirmerCredentials are the call options of a Check in mode: in
// USER_CONFIRMED the confirmer's token (flag, else the environment) under
// [principal.ConfirmerMetadataKey]; none in any other mode.
func confirmerCredentials(e *env, mode admissionv1.Mode, token string) ([]grpc.CallOption, error) {
	if mode != admissionv1.Mode_MODE_USER_CONFIRMED {
		return nil, nil
	}
	if token == "" && e.lookup != nil {
		token, _ = e.lookup(confirmerTokenEnv)
	}
	if token = strings.TrimSpace(token); token == "" {
		return nil, errNoConfirmer
	}
	return []grpc.CallOption{grpc.PerRPCCredentials(principal.ConfirmerToken(token))}, nil
}

func printCheck(w io.Writer, resp *admissionv1.CheckResponse) {
	fmt.Fprintf(w, "decision\t%s\n", enumName(resp.GetDecision().String(), "DECISION_"))
	fmt.Fprintf(w, "reason\t%s\n", reasonName(resp.GetReason()))
	fmt.Fprintf(w, "detail\t%s\n", orDash(safeText(resp.GetDetail())))
	fmt.Fprintf(w, "valid until\t%s\n", when(resp.GetValidUntil()))
	if resp.GetCurrentGeneration() != 0 || resp.GetCurrentDescriptorDigest() != "" {
		fmt.Fprintf(w, "current generation\t%d\n", resp.GetCurrentGeneration())
		fmt.Fprintf(w, "current digest\t%s\n", orDash(resp.GetCurrentDescriptorDigest()))
	}
	fmt.Fprintf(w, "current policy epoch\t%d\n", resp.GetCurrentPolicyEpoch())
	r := resp.GetReceipt()
	if r == nil {
		return
	}
	fmt.Fprintf(w, "receipt\t%s\n", r.GetReceiptId())
	fmt.Fprintf(w, "  principal\t%s@%s\n", orDash(r.GetSubject()), orDash(r.GetTenantId()))
	fmt.Fprintf(w, "  tool\t%s\n", orDash(safeText(r.GetToolId())))
	fmt.Fprintf(w, "  server\t%s\n", orDash(r.GetServerId()))
	fmt.Fprintf(w, "  audience class\t%s\n", orDash(r.GetAudienceClass()))
	fmt.Fprintf(w, "  generation\t%s\n", zeroDash(r.GetGeneration()))
	fmt.Fprintf(w, "  descriptor digest\t%s\n", orDash(r.GetDescriptorDigest()))
	fmt.Fprintf(w, "  policy epoch\t%s\n", zeroDash(r.GetPolicyEpoch()))
	fmt.Fprintf(w, "  argument digest\t%s\n", orDash(r.GetArgumentDigest()))
	fmt.Fprintf(w, "  effect\t%s\n", orDash(unspecifiedDash(effectName(r.GetEffectClass()))))
	fmt.Fprintf(w, "  mode\t%s\n", unspecifiedDash(enumName(r.GetMode().String(), "MODE_")))
	if r.GetConfirmer() != "" {
		fmt.Fprintf(w, "  confirmed by\t%s\n", safeText(r.GetConfirmer()))
		fmt.Fprintf(w, "  confirmed at\t%s\n", when(r.GetConfirmedAt()))
		fmt.Fprintf(w, "  shown digest\t%s\n", orDash(r.GetShownDigest()))
	}
	if r.GetAdmittingGrant() != "" {
		fmt.Fprintf(w, "  admitted by\tthe condition of grant %s\n", safeText(r.GetAdmittingGrant()))
	}
	fmt.Fprintf(w, "  run\t%s\n", orDash(safeText(r.GetRunId())))
	fmt.Fprintf(w, "  decided at\t%s\n", when(r.GetDecidedAt()))
	fmt.Fprintf(w, "  replica\t%s\n", orDash(r.GetReplica()))
}

func zeroDash(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func unspecifiedDash(s string) string {
	if s == "unspecified" {
		return "-"
	}
	return s
}

// visibleCommand is `toolcrib visible`.
func visibleCommand(e *env) *cobra.Command {
	req := &admissionv1.ListVisibleToolsRequest{}
	var effects listFlag
	var maxTools int
	return withFlags(&cobra.Command{
		Use:   "visible",
		Short: "list the tools the caller may call now (model view and runtime view), optionally searched",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := needArgs(args, 0, "no arguments"); err != nil {
				return err
			}
			if maxTools < 0 || maxTools > 1<<30 {
				return fmt.Errorf("--max: must be 0..%d", 1<<30)
			}
			req.MaxTools = int32(maxTools)
			req.EffectClasses = nil
			for _, s := range effects {
				v, err := parseEnum("--effect", s, "EFFECT_CLASS_", catalogv1.EffectClass_value)
				if err != nil {
					return err
				}
				req.EffectClasses = append(req.EffectClasses, catalogv1.EffectClass(v))
			}
			c, err := e.admissionClient()
			if err != nil {
				return err
			}
			cctx, cancel := e.callCtx(ctx)
			defer cancel()
			resp, err := c.ListVisibleTools(cctx, req)
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) { printVisible(w, resp) })
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&req.Query, "query", "", "tool search: rank by BM25 over name, title and description, matches only")
		fs.Var(&effects, "effect", "only these effect classes (read-only, reservation, write, destructive); repeatable or comma-separated")
		fs.IntVar(&maxTools, "max", 0, "at most this many tools; 0 for no limit")
		fs.Int64Var(&req.MaxBytes, "max-bytes", 0, "budget of description and input-schema bytes; 0 for none")
		fs.StringVar(&req.RunId, "run-id", "", "the agent run the list is for (decides whether a server in canary lists its tools)")
	})
}

func printVisible(w *tabwriter.Writer, resp *admissionv1.ListVisibleToolsResponse) {
	fmt.Fprintf(w, "policy epoch\t%d\n", resp.GetPolicyEpoch())
	fmt.Fprintf(w, "visible set\t%d tools, %s\n", resp.GetVisibleCount(), orDash(resp.GetVisibleSetDigest()))
	shown := fmt.Sprintf("%d", len(resp.GetTools()))
	if resp.GetTruncated() {
		shown += " (truncated by --max or --max-bytes)"
	}
	fmt.Fprintf(w, "shown\t%s\n", shown)
	if len(resp.GetTools()) == 0 {
		return
	}
	fmt.Fprintln(w, "\nModel view")
	fmt.Fprintln(w, "NAME\tDESCRIPTION\tINPUT SCHEMA")
	for _, t := range resp.GetTools() {
		m := t.GetModel()
		fmt.Fprintf(w, "%s\t%s\t%s\n", safeText(m.GetName()), orDash(clip(safeText(m.GetDescription()), 60)), schemaText(m.GetInputSchema()))
	}
	fmt.Fprintln(w, "\nRuntime view")
	fmt.Fprintln(w, "NAME\tTOOL ID\tSERVER\tAUDIENCE CLASS\tGEN\tDIGEST\tEFFECT\tSOURCE\tCONFIRM")
	for _, t := range resp.GetTools() {
		r := t.GetRuntime()
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", safeText(t.GetModel().GetName()), safeText(r.GetToolId()), r.GetServerId(),
			r.GetAudienceClass(), r.GetGeneration(), r.GetDescriptorDigest(), effectName(r.GetEffectClass()),
			short(r.GetSourceState()), yesNo(r.GetConfirmationRequired()))
	}
}

// clip shortens s to n runes for a table cell.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// schemaText is a compact input schema for a table cell.
func schemaText(raw []byte) string {
	if len(raw) == 0 {
		return "-"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return fmt.Sprintf("(%d bytes, not JSON)", len(raw))
	}
	return clip(safeText(b.String()), 60)
}
