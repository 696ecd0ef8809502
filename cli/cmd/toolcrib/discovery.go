package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery"
)

// discoveryClient dials the discovery service.
func (e *env) discoveryClient() (discoveryv1.DiscoveryServiceClient, error) {
	c, err := e.dial(e.discoveryAddr)
	if err != nil {
		return nil, err
	}
	return discoveryv1.NewDiscoveryServiceClient(c), nil
}

// short trims the enum prefixes for text output.
func short(s fmt.Stringer) string {
	v := s.String()
	for _, p := range []string{"DISCOVERY_STATE_", "RUN_REASON_", "SCAN_TRIGGER_", "POINTER_STATE_", "POINTER_MOVE_"} {
		v = strings.TrimPrefix(v, p)
	}
	if v == "UNSPECIFIED" {
		return "-"
	}
	return v
}

func parseState(s string) (catalogv1.DiscoveryState, error) {
	v, ok := catalogv1.DiscoveryState_value["DISCOVERY_STATE_"+strings.ToUpper(s)]
	if !ok || v == 0 {
		return 0, fmt.Errorf("unknown state %q (e.g. ELIGIBLE, INCOMPLETE, QUARANTINED)", s)
	}
	return catalogv1.DiscoveryState(v), nil
}

func discoveryCommands() []command {
	var (
		audience, server, scanID, state, reason string
		limit                                   int
		pages, raw, wait, beats                 bool
		generation, expected, to, from          int64
	)
	return []command{
		{
			name:    "discovery scan",
			args:    "<server-id>",
			summary: "queue a scan of a server (as one audience class, or every class covering it)",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&audience, "audience", "", "audience class; empty scans as every class covering the server")
				fs.BoolVar(&wait, "wait", false, "wait until each scan ended and print its run")
			},
			run: func(ctx context.Context, e *env, args []string) error {
				if err := needArgs(args, 1, "<server-id>"); err != nil {
					return err
				}
				c, err := e.discoveryClient()
				if err != nil {
					return err
				}
				cctx, cancel := e.callCtx(ctx)
				defer cancel()
				resp, err := c.TriggerScan(cctx, &discoveryv1.TriggerScanRequest{ServerId: args[0], AudienceClass: audience})
				if err != nil {
					return err
				}
				if !wait {
					return e.output(resp, func(w *tabwriter.Writer) {
						fmt.Fprintln(w, "SERVER\tAUDIENCE CLASS\tSCAN\tALREADY QUEUED")
						for _, t := range resp.GetScans() {
							fmt.Fprintf(w, "%s\t%s\t%s\t%v\n", t.GetServerId(), t.GetAudienceClass(), t.GetScanId(), t.GetAlreadyQueued())
						}
					})
				}
				runs := &discoveryv1.ListRunsResponse{}
				for _, t := range resp.GetScans() {
					r, err := discovery.WaitScan(ctx, c, t.GetScanId(), nil)
					if err != nil {
						return err
					}
					runs.Runs = append(runs.Runs, r)
				}
				return e.output(runs, func(w *tabwriter.Writer) { runTable(w, runs.GetRuns()) })
			},
		},
		{
			name:    "discovery runs",
			summary: "list discovery runs, newest first",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&server, "server", "", "only runs of this server")
				fs.StringVar(&audience, "audience", "", "only runs as this audience class")
				fs.StringVar(&scanID, "scan", "", "only attempts of this scan")
				fs.StringVar(&state, "state", "", "only runs in these states, comma-separated (e.g. INCOMPLETE,QUARANTINED)")
				fs.IntVar(&limit, "limit", 50, "most runs to print")
			},
			run: func(ctx context.Context, e *env, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				req := &discoveryv1.ListRunsRequest{ServerId: server, AudienceClass: audience, ScanId: scanID}
				for _, s := range strings.Split(state, ",") {
					if s = strings.TrimSpace(s); s != "" {
						st, err := parseState(s)
						if err != nil {
							return err
						}
						req.States = append(req.States, st)
					}
				}
				c, err := e.discoveryClient()
				if err != nil {
					return err
				}
				out := &discoveryv1.ListRunsResponse{}
				for len(out.Runs) < limit {
					req.PageSize = int32(min(limit-len(out.Runs), 500))
					cctx, cancel := e.callCtx(ctx)
					resp, err := c.ListRuns(cctx, req)
					cancel()
					if err != nil {
						return err
					}
					out.Runs = append(out.Runs, resp.GetRuns()...)
					if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
						break
					}
				}
				return e.output(out, func(w *tabwriter.Writer) { runTable(w, out.GetRuns()) })
			},
		},
		{
			name:    "discovery run",
			args:    "<run-id>",
			summary: "show one run, with its pages",
			flags: func(fs *flag.FlagSet) {
				fs.BoolVar(&pages, "pages", true, "show the pages read")
			},
			run: func(ctx context.Context, e *env, args []string) error {
				if err := needArgs(args, 1, "<run-id>"); err != nil {
					return err
				}
				c, err := e.discoveryClient()
				if err != nil {
					return err
				}
				cctx, cancel := e.callCtx(ctx)
				defer cancel()
				resp, err := c.GetRun(cctx, &discoveryv1.GetRunRequest{RunId: args[0], IncludePages: pages})
				if err != nil {
					return err
				}
				return e.output(resp, func(w *tabwriter.Writer) { runDetail(w, resp.GetRun()) })
			},
		},
		{
			name:    "discovery snapshot",
			args:    "<server-id> <audience-class>",
			summary: "show the active snapshot (or one generation) of a server as an audience class",
			flags: func(fs *flag.FlagSet) {
				fs.Int64Var(&generation, "generation", 0, "a generation; 0 shows the active one")
				fs.BoolVar(&raw, "raw", false, "print each tool's raw JSON")
			},
			run: func(ctx context.Context, e *env, args []string) error {
				if err := needArgs(args, 2, "<server-id> <audience-class>"); err != nil {
					return err
				}
				c, err := e.discoveryClient()
				if err != nil {
					return err
				}
				resp, err := fetchSnapshot(ctx, e, c, args[0], args[1], generation)
				if err != nil {
					return err
				}
				return e.output(resp, func(w *tabwriter.Writer) { snapshotText(w, resp, raw) })
			},
		},
		{
			name:    "discovery generations",
			args:    "<server-id> <audience-class>",
			summary: "list the generations of a server as an audience class, newest first",
			run: func(ctx context.Context, e *env, args []string) error {
				if err := needArgs(args, 2, "<server-id> <audience-class>"); err != nil {
					return err
				}
				c, err := e.discoveryClient()
				if err != nil {
					return err
				}
				out := &discoveryv1.ListGenerationsResponse{}
				req := &discoveryv1.ListGenerationsRequest{ServerId: args[0], AudienceClass: args[1], PageSize: 500}
				for {
					cctx, cancel := e.callCtx(ctx)
					resp, err := c.ListGenerations(cctx, req)
					cancel()
					if err != nil {
						return err
					}
					out.Generations = append(out.Generations, resp.GetGenerations()...)
					if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
						break
					}
				}
				return e.output(out, func(w *tabwriter.Writer) {
					fmt.Fprintln(w, "GEN\tSTATE\tACTIVE\tREVISION\tTOOLS\tCOMMITTED\tFRESH UNTIL\tBOUND UNTIL\tPAGE ROOT")
					for _, g := range out.GetGenerations() {
						fmt.Fprintf(w, "%d\t%s\t%v\t%s\t%d\t%s\t%s\t%s\t%s\n", g.GetGeneration(), short(g.GetState()), g.GetActive(),
							orDash(g.GetSourceRevision()), g.GetToolCount(), when(g.GetCommittedAt()), when(g.GetExpiresAt()),
							when(g.GetBoundUntil()), shortDigest(g.GetPageRoot()))
					}
				})
			},
		},
		{
			name:    "discovery rollback",
			args:    "<server-id> <audience-class>",
			summary: "move the active pointer back to an older fresh generation (or close the server when none is fresh)",
			flags: func(fs *flag.FlagSet) {
				fs.Int64Var(&expected, "expected", 0, "the generation you see active now (required; compare-and-swap)")
				fs.Int64Var(&to, "to", 0, "target generation; 0 means the newest older one that is still fresh")
				fs.StringVar(&reason, "reason", "", "why, recorded in the catalog receipt")
			},
			run: func(ctx context.Context, e *env, args []string) error {
				if err := needArgs(args, 2, "<server-id> <audience-class>"); err != nil {
					return err
				}
				if expected < 1 {
					return errors.New("--expected is required: the generation you see active now")
				}
				c, err := e.discoveryClient()
				if err != nil {
					return err
				}
				cctx, cancel := e.callCtx(ctx)
				defer cancel()
				resp, err := c.Rollback(cctx, &discoveryv1.RollbackRequest{ServerId: args[0], AudienceClass: args[1],
					ExpectedGeneration: expected, ToGeneration: to, Reason: reason})
				if err != nil {
					return err
				}
				return e.output(resp, func(w *tabwriter.Writer) {
					p, r := resp.GetPointer(), resp.GetReceipt()
					fmt.Fprintf(w, "pointer:\t%s/%s now %s at generation %d (was %d)\n", p.GetServerId(), p.GetAudienceClass(),
						short(p.GetState()), p.GetGeneration(), r.GetPreviousGeneration())
					fmt.Fprintf(w, "receipt:\t%s %s at %s\n", short(r.GetMove()), r.GetReceiptId(), when(r.GetAcceptedAt()))
					fmt.Fprintf(w, "note:\tlease issuance is not frozen by discovery; freeze it with the lease service\n")
				})
			},
		},
		{
			name:    "discovery watch",
			summary: "stream active-pointer changes as they commit (Ctrl-C to stop)",
			flags: func(fs *flag.FlagSet) {
				fs.Int64Var(&from, "from", 0, "send changes after this revision; 0 sends every change still kept")
				fs.BoolVar(&beats, "heartbeats", false, "print heartbeats too")
			},
			run: func(ctx context.Context, e *env, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				c, err := e.discoveryClient()
				if err != nil {
					return err
				}
				stream, err := c.Watch(ctx, &discoveryv1.WatchRequest{FromRevision: from})
				if err != nil {
					return err
				}
				for {
					msg, err := stream.Recv()
					if errors.Is(err, io.EOF) || (err != nil && stoppedByCaller(ctx, err)) {
						return nil
					}
					if err != nil {
						return err
					}
					if err := printWatch(e, msg, beats); err != nil {
						return err
					}
				}
			},
		},
	}
}

func printWatch(e *env, msg *discoveryv1.WatchResponse, beats bool) error {
	if hb := msg.GetHeartbeat(); hb != nil {
		if !beats {
			return nil
		}
		if e.asJSON {
			return e.printJSON(msg)
		}
		_, err := fmt.Fprintf(e.stdout, "heartbeat revision=%d at %s\n", hb.GetRevision(), when(hb.GetSentAt()))
		return err
	}
	if e.asJSON {
		return e.printJSON(msg)
	}
	ch := msg.GetChange()
	p, r := ch.GetPointer(), ch.GetReceipt()
	_, err := fmt.Fprintf(e.stdout, "%d\t%s\t%s/%s\tgeneration %d\t%s\t%s\n", ch.GetRevision(), short(r.GetMove()),
		p.GetServerId(), p.GetAudienceClass(), p.GetGeneration(), short(p.GetState()), short(p.GetSnapshotState()))
	return err
}

// fetchSnapshot reads a whole snapshot, paging through its tools.
func fetchSnapshot(ctx context.Context, e *env, c discoveryv1.DiscoveryServiceClient, server, aud string, gen int64) (*discoveryv1.GetActiveSnapshotResponse, error) {
	const page = 500
	cctx, cancel := e.callCtx(ctx)
	defer cancel()
	out := &discoveryv1.GetActiveSnapshotResponse{}
	var next string
	if gen == 0 {
		resp, err := c.GetActiveSnapshot(cctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: server, AudienceClass: aud, ToolsPageSize: page})
		if err != nil {
			return nil, err
		}
		out.Pointer, out.Snapshot, next = resp.GetPointer(), resp.GetSnapshot(), resp.GetNextToolsPageToken()
		if out.Snapshot == nil {
			return out, nil
		}
		gen = out.Snapshot.GetGeneration()
	} else {
		resp, err := c.GetSnapshot(cctx, &discoveryv1.GetSnapshotRequest{ServerId: server, AudienceClass: aud, Generation: gen, ToolsPageSize: page})
		if err != nil {
			return nil, err
		}
		out.Snapshot, next = resp.GetSnapshot(), resp.GetNextToolsPageToken()
	}
	for next != "" {
		resp, err := c.GetSnapshot(cctx, &discoveryv1.GetSnapshotRequest{ServerId: server, AudienceClass: aud, Generation: gen,
			ToolsPageSize: page, ToolsPageToken: next})
		if err != nil {
			return nil, err
		}
		out.Snapshot.Tools = append(out.Snapshot.Tools, resp.GetSnapshot().GetTools()...)
		next = resp.GetNextToolsPageToken()
	}
	return out, nil
}

func snapshotText(w *tabwriter.Writer, resp *discoveryv1.GetActiveSnapshotResponse, raw bool) {
	if p := resp.GetPointer(); p != nil {
		fmt.Fprintf(w, "pointer:\t%s at generation %d, %s, fresh until %s (watch revision %d)\n", short(p.GetState()),
			p.GetGeneration(), short(p.GetSnapshotState()), when(p.GetFreshUntil()), p.GetRevision())
	}
	s := resp.GetSnapshot()
	if s == nil {
		fmt.Fprintln(w, "snapshot:\tnone: the server is closed for this audience class (admission answers SERVER_CLOSED)")
		return
	}
	fmt.Fprintf(w, "snapshot:\t%s generation %d, %s\n", s.GetSchema(), s.GetGeneration(), short(s.GetState()))
	fmt.Fprintf(w, "server:\t%s (identity %s)\n", s.GetServerId(), s.GetIdentityDigest())
	fmt.Fprintf(w, "audience class:\t%s (tenant %s, cache scope %s)\n", s.GetAudienceClass(), s.GetTenant(), orDash(s.GetCacheScope()))
	fmt.Fprintf(w, "protocol:\t%s\n", orDash(s.GetProtocolVersion()))
	fmt.Fprintf(w, "source revision:\t%s\n", orDash(s.GetSourceRevision()))
	fmt.Fprintf(w, "page root:\t%s (%d pages)\n", s.GetPageRoot(), len(s.GetPageDigests()))
	fmt.Fprintf(w, "policy epoch:\t%d\n", s.GetPolicyEpoch())
	fmt.Fprintf(w, "discovered:\t%s, expires %s\n", when(s.GetDiscoveryStartedAt()), when(s.GetExpiresAt()))
	fmt.Fprintf(w, "snapshot digest:\t%s\n", s.GetSnapshotDigest())
	fmt.Fprintf(w, "run:\t%s\n\n", s.GetRunId())
	fmt.Fprintln(w, "TOOL ID\tDESCRIPTOR DIGEST\tINPUT SCHEMA\tFLAGS\tDESCRIPTION")
	for _, t := range s.GetTools() {
		desc := t.GetDescription()
		if len(desc) > 60 {
			desc = desc[:60] + "…"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.GetToolId(), shortDigest(t.GetDescriptorDigest()), shortDigest(t.GetInputSchemaDigest()),
			orDash(strings.Join(t.GetFlags(), ",")), safe(strings.ReplaceAll(desc, "\n", " ")))
		if raw {
			fmt.Fprintf(w, "\t%s\n", t.GetRaw())
		}
	}
}

func runTable(w *tabwriter.Writer, runs []*discoveryv1.Run) {
	fmt.Fprintln(w, "RUN\tSCAN\tTRY\tSERVER\tAUDIENCE CLASS\tSTATE\tREASON\tGEN\tPAGES\tTOOLS\tTRIGGER\tSTARTED")
	for _, r := range runs {
		gen := strconv.FormatInt(r.GetGeneration(), 10)
		if r.GetGeneration() == 0 {
			gen = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.GetRunId(), r.GetScanId(), r.GetAttempt(), r.GetServerId(),
			r.GetAudienceClass(), short(r.GetState()), short(r.GetReason()), gen, r.GetPageCount(), r.GetToolCount(),
			short(r.GetTrigger()), when(r.GetStartedAt()))
	}
}

func runDetail(w *tabwriter.Writer, r *discoveryv1.Run) {
	fmt.Fprintf(w, "run:\t%s (scan %s, attempt %d, %s)\n", r.GetRunId(), r.GetScanId(), r.GetAttempt(), short(r.GetTrigger()))
	fmt.Fprintf(w, "server:\t%s as %s (tenant %s)\n", r.GetServerId(), r.GetAudienceClass(), orDash(r.GetTenantId()))
	fmt.Fprintf(w, "state:\t%s\n", short(r.GetState()))
	fmt.Fprintf(w, "reason:\t%s\n", short(r.GetReason()))
	if r.GetDetail() != "" {
		fmt.Fprintf(w, "detail:\t%s\n", r.GetDetail())
	}
	fmt.Fprintf(w, "worker:\t%s\n", r.GetWorker())
	fmt.Fprintf(w, "started:\t%s, finished %s\n", when(r.GetStartedAt()), when(r.GetFinishedAt()))
	fmt.Fprintf(w, "protocol:\t%s\n", orDash(r.GetProtocolVersion()))
	fmt.Fprintf(w, "revision:\t%s (closing re-check %s)\n", orDash(r.GetSourceRevision()), orDash(r.GetClosingRevision()))
	fmt.Fprintf(w, "page root:\t%s\n", orDash(r.GetPageRoot()))
	fmt.Fprintf(w, "read:\t%d pages, %d tools, %d bytes (cache scope %s)\n", r.GetPageCount(), r.GetToolCount(), r.GetBytes(), orDash(r.GetCacheScope()))
	fmt.Fprintf(w, "policy epoch:\t%d\n", r.GetPolicyEpoch())
	fmt.Fprintf(w, "identity:\t%s\n", orDash(r.GetIdentityDigest()))
	fmt.Fprintf(w, "trust config:\t%s\n", orDash(r.GetTrustConfigDigest()))
	switch {
	case r.GetGeneration() > 0:
		fmt.Fprintf(w, "committed:\tgeneration %d\n", r.GetGeneration())
	case r.GetConfirmedGeneration() > 0:
		fmt.Fprintf(w, "confirmed:\tgeneration %d (unchanged; freshness extended)\n", r.GetConfirmedGeneration())
	}
	for _, f := range r.GetFlags() {
		fmt.Fprintf(w, "flag:\t%s on %s: %s\n", f.GetFlag(), f.GetToolName(), f.GetDetail())
	}
	if len(r.GetPages()) > 0 {
		fmt.Fprintln(w, "\nPAGE\tCURSOR IN\tCURSOR OUT\tNEXT\tREVISION\tTOOLS\tBYTES\tDIGEST")
		for _, p := range r.GetPages() {
			fmt.Fprintf(w, "%d\t%s\t%s\t%v\t%s\t%d\t%d\t%s\n", p.GetIndex(), orDash(p.GetCursorIn()), orDash(p.GetCursorOut()),
				p.GetHasNext(), orDash(p.GetRevision()), p.GetToolCount(), p.GetBytes(), shortDigest(p.GetPageDigest()))
		}
	}
}
