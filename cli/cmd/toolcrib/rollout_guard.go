package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

func ruleName(r discoveryv1.GuardRule) string { return strings.TrimPrefix(r.String(), "GUARD_RULE_") }

// evidence is one cell: the missing-tool figures or the incident ids.
func evidence(x *discoveryv1.GuardAction) string {
	switch x.GetRule() {
	case discoveryv1.GuardRule_GUARD_RULE_MISSING_TOOL_RATE:
		rate := 0.0
		if x.GetChecks() > 0 {
			rate = float64(x.GetMissing()) / float64(x.GetChecks())
		}
		s := fmt.Sprintf("%d/%d missing (%.3f > %.3f) vs gen %d since %s", x.GetMissing(), x.GetChecks(), rate, x.GetThreshold(),
			x.GetPreviousGeneration(), when(x.GetWindowStart()))
		if len(x.GetMissingTools()) > 0 {
			s += ": " + safeText(strings.Join(x.GetMissingTools(), ","))
		}
		return s
	default:
		return fmt.Sprintf("%d incident(s): %s", len(x.GetIncidentIds()), safeText(strings.Join(x.GetIncidentIds(), ",")))
	}
}

func resumedText(x *discoveryv1.GuardAction) string {
	if x.GetResumedAt() == nil {
		return "held"
	}
	return fmt.Sprintf("%s by %s: %s", when(x.GetResumedAt()), safeText(x.GetResumedBy()), safeText(x.GetResumeReason()))
}

// rolloutResumeCommand is `toolcrib rollout resume`.
func rolloutResumeCommand(e *env) *cobra.Command {
	var reason string
	return withFlags(&cobra.Command{
		Use: "resume <server-id> <audience-class>",
		Short: "end the rollout guard's hold on a pair after an automatic rollback or close (admin); " +
			"the pointer stays where it is and lease issuance stays frozen until `lease freeze --resume`",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 2, "<server-id> <audience-class>"); err != nil {
				return err
			}
			if reason == "" {
				return errors.New("--reason is required")
			}
			c, err := e.discoveryClient()
			if err != nil {
				return err
			}
			cctx, cancel := e.callCtx(ctx)
			defer cancel()
			resp, err := c.ResumeGuard(cctx, &discoveryv1.ResumeGuardRequest{ServerId: a[0], AudienceClass: a[1], Reason: reason})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				if len(resp.GetResumed()) == 0 {
					fmt.Fprintf(w, "resumed:\tnothing: the guard held no action for %s/%s\n", a[0], a[1])
					return
				}
				for _, x := range resp.GetResumed() {
					fmt.Fprintf(w, "resumed:\taction %d (%s %s, %d -> %d)\n", x.GetActionId(), ruleName(x.GetRule()), short(x.GetMove()),
						x.GetFromGeneration(), x.GetToGeneration())
				}
				fmt.Fprintf(w, "note:\tlease issuance for %s stays frozen until `toolcrib lease freeze --resume %s`\n", a[0], a[0])
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&reason, "reason", "", "why (required; recorded with the action)")
	})
}

// rolloutActionsCommand is `toolcrib rollout actions`.
func rolloutActionsCommand(e *env) *cobra.Command {
	var server, class string
	var held bool
	return withFlags(&cobra.Command{
		Use:   "actions ",
		Short: "list the rollout guard's automatic rollbacks and closes, newest first, with their evidence (admin); --held: only pairs still held",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 0, "no arguments"); err != nil {
				return err
			}
			c, err := e.discoveryClient()
			if err != nil {
				return err
			}
			req := &discoveryv1.ListGuardActionsRequest{ServerId: server, AudienceClass: class, HeldOnly: held, PageSize: 1000}
			var all []*discoveryv1.GuardAction
			for {
				cctx, cancel := e.callCtx(ctx)
				resp, err := c.ListGuardActions(cctx, req)
				cancel()
				if err != nil {
					return err
				}
				all = append(all, resp.GetActions()...)
				if resp.GetNextPageToken() == "" {
					break
				}
				req.PageToken = resp.GetNextPageToken()
			}
			return e.output(&discoveryv1.ListGuardActionsResponse{Actions: all}, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tAT\tSERVER\tAUDIENCE CLASS\tRULE\tMOVE\tGENERATIONS\tEVIDENCE\tRESUMED")
				for _, x := range all {
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%d -> %d\t%s\t%s\n", x.GetActionId(), when(x.GetDecidedAt()), x.GetServerId(),
						x.GetAudienceClass(), ruleName(x.GetRule()), short(x.GetMove()), x.GetFromGeneration(), x.GetToGeneration(),
						evidence(x), resumedText(x))
				}
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&server, "server", "", "only this server")
		fs.StringVar(&class, "class", "", "only this audience class")
		fs.BoolVar(&held, "held", false, "only actions not resumed yet")
	})
}
