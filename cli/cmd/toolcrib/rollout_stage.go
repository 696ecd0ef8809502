package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// parseStage reads `shadow`, `canary` or `full` (or STAGE_…).
func parseStage(s string) (registryv1.Stage, error) {
	if s == "" {
		return 0, fmt.Errorf("stage: required: shadow, canary or full")
	}
	v, err := parseEnum("stage", s, "STAGE_", registryv1.Stage_value)
	return registryv1.Stage(v), err
}

func stageName(s registryv1.Stage) string { return enumName(s.String(), "STAGE_") }

// parseEffects reads effect classes in any spelling parseEnum accepts.
func parseEffects(names []string) ([]catalogv1.EffectClass, error) {
	var out []catalogv1.EffectClass
	for _, n := range names {
		v, err := parseEnum("effect", n, "EFFECT_CLASS_", catalogv1.EffectClass_value)
		if err != nil {
			return nil, err
		}
		out = append(out, catalogv1.EffectClass(v))
	}
	return out, nil
}

// stageText is one line: `canary 5% read-only` or `full`.
func stageText(st *registryv1.RolloutStage) string {
	s := stageName(st.GetStage())
	if st.GetStage() == registryv1.Stage_STAGE_CANARY {
		var effects []string
		for _, e := range st.GetCanaryEffects() {
			effects = append(effects, effectName(e))
		}
		s += fmt.Sprintf(" %d%% %s", st.GetCanaryPercent(), strings.Join(effects, ","))
	}
	if st.GetVersion() == 0 {
		s += " (never set)"
	}
	return s
}

func printStage(w io.Writer, st *registryv1.RolloutStage) {
	fmt.Fprintf(w, "server\t%s\n", st.GetServerId())
	fmt.Fprintf(w, "audience class\t%s\n", st.GetAudienceClass())
	fmt.Fprintf(w, "stage\t%s\n", stageText(st))
	if st.GetVersion() > 0 {
		fmt.Fprintf(w, "reason\t%s\n", safeText(st.GetReason()))
		fmt.Fprintf(w, "changed by\t%s at %s\n", st.GetChangedBy(), when(st.GetUpdatedAt()))
		fmt.Fprintf(w, "version\t%d\n", st.GetVersion())
		fmt.Fprintf(w, "since policy epoch\t%d\n", st.GetPolicyEpoch())
	}
}

// pairArgs checks for the two arguments naming a (server, audience class)
// pair.
func pairArgs(a []string) error { return needArgs(a, 2, "<server-id> <audience-class>") }

// rolloutSetCommand is `toolcrib rollout set`.
func rolloutSetCommand(e *env) *cobra.Command {
	var stage string
	var reason string
	var percent string
	var effects listFlag
	var version int64
	return withFlags(&cobra.Command{
		Use: "set <server-id> <audience-class>",
		Short: "set the rollout stage of a server for an audience class (admin or the server's owner): " +
			"shadow, canary (--percent of runs, default 5; --effects, default read-only) or full; bumps the tenant's policy epoch",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := pairArgs(a); err != nil {
				return err
			}
			st, err := parseStage(stage)
			if err != nil {
				return err
			}
			eff, err := parseEffects(effects)
			if err != nil {
				return err
			}
			req := &registryv1.SetRolloutStageRequest{ServerId: a[0], AudienceClass: a[1], Stage: st, CanaryEffects: eff,
				Reason: reason, ExpectedVersion: version}
			if percent != "" {
				n, err := strconv.ParseInt(strings.TrimSuffix(percent, "%"), 10, 32)
				if err != nil {
					return fmt.Errorf("--percent %q: not a number", percent)
				}
				req.CanaryPercent = proto.Int32(int32(n))
			}
			resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.SetRolloutStageResponse, error) {
				return c.SetRolloutStage(ctx, req)
			})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				printStage(w, resp.GetRolloutStage())
				if !resp.GetChanged() {
					fmt.Fprintf(w, "changed\tno: already at this stage\n")
				}
				fmt.Fprintf(w, "policy epoch\t%d\n", resp.GetPolicyEpoch())
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&stage, "stage", "", "shadow, canary or full (required)")
		fs.StringVar(&percent, "percent", "", "canary: the share of runs admitted, 0..100 (default 5)")
		fs.Var(&effects, "effects", "canary: effect classes admitted, e.g. read-only,write (default read-only)")
		fs.StringVar(&reason, "reason", "", "why (required; recorded in the history)")
		fs.Int64Var(&version, "version", 0, "the version you read, to change only if nobody changed it since; 0 skips the check")
	})
}

// rolloutShowCommand is `toolcrib rollout show`.
func rolloutShowCommand(e *env) *cobra.Command {
	var tenantFilter string
	var serverFilter string
	return withFlags(&cobra.Command{
		Use:   "show [<server-id> <audience-class>]",
		Short: "show the rollout stage of one pair, or list every pair (--tenant and --server filter)",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if len(a) == 2 {
				resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.GetRolloutStageResponse, error) {
					return c.GetRolloutStage(ctx, &registryv1.GetRolloutStageRequest{ServerId: a[0], AudienceClass: a[1]})
				})
				if err != nil {
					return err
				}
				return e.output(resp, func(w *tabwriter.Writer) { printStage(w, resp.GetRolloutStage()) })
			}
			if err := needArgs(a, 0, "no arguments, or <server-id> <audience-class>"); err != nil {
				return err
			}
			list, err := listStages(ctx, e, &registryv1.ListRolloutStagesRequest{TenantId: tenantFilter, ServerId: serverFilter})
			if err != nil {
				return err
			}
			return e.output(&registryv1.ListRolloutStagesResponse{RolloutStages: list}, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "AUDIENCE CLASS\tSERVER\tSTAGE\tVERSION\tREASON")
				for _, st := range list {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", st.GetAudienceClass(), st.GetServerId(), stageText(st), st.GetVersion(), orDash(safeText(st.GetReason())))
				}
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&tenantFilter, "tenant", "", "list: only this tenant's classes")
		fs.StringVar(&serverFilter, "server", "", "list: only this server")
	})
}

// rolloutHistoryCommand is `toolcrib rollout history`.
func rolloutHistoryCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "history <server-id> <audience-class>",
		Short: "show every stage a server was set to for an audience class, oldest first, with reasons",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := pairArgs(a); err != nil {
				return err
			}
			resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.GetRolloutStageResponse, error) {
				return c.GetRolloutStage(ctx, &registryv1.GetRolloutStageRequest{ServerId: a[0], AudienceClass: a[1], IncludeHistory: true})
			})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "now\t%s\n\n", stageText(resp.GetRolloutStage()))
				fmt.Fprintln(w, "VERSION\tEPOCH\tSTAGE\tBY\tAT\tREASON")
				for _, h := range resp.GetHistory() {
					fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\n", h.GetVersion(), h.GetPolicyEpoch(), stageText(h), h.GetChangedBy(),
						when(h.GetUpdatedAt()), safeText(h.GetReason()))
				}
			})
		},
	}
}

// listStages reads every page of ListRolloutStages.
func listStages(ctx context.Context, e *env, req *registryv1.ListRolloutStagesRequest) ([]*registryv1.RolloutStage, error) {
	var out []*registryv1.RolloutStage
	req.PageSize = 1000
	for {
		resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.ListRolloutStagesResponse, error) {
			return c.ListRolloutStages(ctx, req)
		})
		if err != nil {
			return nil, err
		}
		out = append(out, resp.GetRolloutStages()...)
		if resp.GetNextPageToken() == "" {
			return out, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

// rolloutGroup is `toolcrib rollout …`: stages (this file), the static
// list and the diff (rollout_shadow.go), the guard (rollout_guard.go).
func rolloutGroup(e *env) *cobra.Command {
	return group("rollout", "roll a server out to an audience class: shadow, canary, full; the static list, the diff and the guard",
		rolloutSetCommand(e), rolloutShowCommand(e), rolloutHistoryCommand(e),
		group("static", "the static tool list in use today, compared with what discovery proves",
			rolloutStaticSetCommand(e), rolloutStaticShowCommand(e)),
		rolloutDiffCommand(e), rolloutActionsCommand(e), rolloutResumeCommand(e))
}
