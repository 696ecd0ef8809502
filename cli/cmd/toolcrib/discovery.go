package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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

// callDiscovery runs one unary call with the per-call deadline.
func callDiscovery[T any](ctx context.Context, e *env, call func(context.Context, discoveryv1.DiscoveryServiceClient) (T, error)) (T, error) {
	var zero T
	c, err := e.discoveryClient()
	if err != nil {
		return zero, err
	}
	ctx, cancel := e.callCtx(ctx)
	defer cancel()
	return call(ctx, c)
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

// errNotActivated is returned (exit status 1) when `discovery scan --wait`
// saw an attempt end without an active catalog.
var errNotActivated = errors.New("the scan did not activate a catalog")

// scanCommand is `toolcrib discovery scan`.
func scanCommand(e *env) *cobra.Command {
	var audience string
	var wait bool
	return withFlags(&cobra.Command{
		Use:   "scan <server-id>",
		Short: "queue a scan of a server (as one audience class, or every class covering it)",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := needArgs(args, 1, "<server-id>"); err != nil {
				return err
			}
			c, err := e.discoveryClient()
			if err != nil {
				return err
			}
			var endedBefore map[string]bool
			if wait {
				// The attempts that ended before the trigger are not the
				// one to wait for.
				cctx, cancel := e.callCtx(ctx)
				endedBefore, err = discovery.EndedRuns(cctx, c, args[0], audience)
				cancel()
				if err != nil {
					return err
				}
			}
			resp, err := triggerScan(ctx, e, c, args[0], audience)
			if err != nil {
				return err
			}
			if !wait {
				return e.output(resp, func(w *tabwriter.Writer) { ticketTable(w, resp.GetScans()) })
			}
			runs, err := waitAttempts(ctx, e, c, resp.GetScans(), endedBefore)
			if err != nil {
				return err
			}
			if err := e.output(runs, func(w *tabwriter.Writer) { runTable(w, runs.GetRuns()) }); err != nil {
				return err
			}
			return scanVerdict(e, runs.GetRuns())
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&audience, "audience", "", "audience class; empty scans as every class covering the server")
		fs.BoolVar(&wait, "wait", false, "wait until the attempt each scan queued ended, print its run, and exit non-zero unless it activated")
	})
}

// triggerScan queues the scans; a server that no audience class covers is
// an error (nothing would be scanned).
func triggerScan(ctx context.Context, e *env, c discoveryv1.DiscoveryServiceClient, server, audience string) (*discoveryv1.TriggerScanResponse, error) {
	cctx, cancel := e.callCtx(ctx)
	defer cancel()
	resp, err := c.TriggerScan(cctx, &discoveryv1.TriggerScanRequest{ServerId: server, AudienceClass: audience})
	if err != nil {
		return nil, err
	}
	if len(resp.GetScans()) == 0 {
		return nil, fmt.Errorf("no audience class covers server %s: nothing was scanned (bind the server to a class with `toolcrib audience put`)", server)
	}
	return resp, nil
}

func ticketTable(w *tabwriter.Writer, scans []*discoveryv1.ScanTicket) {
	fmt.Fprintln(w, "SERVER\tAUDIENCE CLASS\tSCAN\tALREADY QUEUED")
	for _, t := range scans {
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\n", t.GetServerId(), t.GetAudienceClass(), t.GetScanId(), t.GetAlreadyQueued())
	}
}

// waitAttempts waits, for each ticket, until the attempt it stands for
// ended (see [discovery.WaitAttempt]), however it ended: never through the
// retries of a failing scan.
func waitAttempts(ctx context.Context, e *env, c discoveryv1.DiscoveryServiceClient, scans []*discoveryv1.ScanTicket, endedBefore map[string]bool) (*discoveryv1.ListRunsResponse, error) {
	runs := &discoveryv1.ListRunsResponse{}
	for _, t := range scans {
		if t.GetAlreadyQueued() {
			r, next, err := nudge(ctx, e, c, t, endedBefore)
			if err != nil {
				return nil, err
			}
			if r != nil {
				runs.Runs = append(runs.Runs, r)
				continue
			}
			t = next
		}
		r, err := discovery.WaitAttempt(ctx, c, t, endedBefore)
		if err != nil {
			return nil, err
		}
		// A policy change committed during the attempt (a grant or class
		// put just before the scan, as in the tour) is nobody's fault and
		// is retried at once: wait for that retry, a few times at most.
		for i := 0; i < epochRetries && r.GetReason() == discoveryv1.RunReason_RUN_REASON_POLICY_EPOCH_CHANGED && discovery.Retried(r); i++ {
			fmt.Fprintf(e.stderr, "%s as %s: attempt %d of scan %s saw the policy epoch move; waiting for its retry\n",
				r.GetServerId(), r.GetAudienceClass(), r.GetAttempt(), r.GetScanId())
			if endedBefore == nil {
				endedBefore = map[string]bool{}
			}
			endedBefore[r.GetRunId()] = true
			if r, err = discovery.WaitAttempt(ctx, c, t, endedBefore); err != nil {
				return nil, err
			}
		}
		runs.Runs = append(runs.Runs, r)
	}
	return runs, nil
}

// epochRetries is how many attempts ended by a policy change (the tenant's
// epoch moved during the scan) `scan --wait` follows before it reports.
const epochRetries = 3

// nudgeFor is how long [nudge] waits for the retry of a queued scan whose
// last attempt ended INCOMPLETE before the trigger.
const nudgeFor = 10 * time.Second

// nudge handles a ticket for a scan that was already queued. It returns the
// ticket to wait on when an attempt of that scan started after the trigger,
// or none started yet, else the attempt that ends the wait:
//
//   - the scan's last attempt ended in a final state (anything [discovery.Retried]
//     is false for: QUARANTINED, ELIGIBLE, UNCHANGED, NOT_REGISTERED…) before
//     the trigger: the queue records a job's end a moment after its run's, so
//     the trigger found that scan, which makes no more attempts. Its last
//     attempt is the answer; nothing is triggered again (a new trigger would
//     make a new scan each time, the scan never asked for).
//   - its last attempt ended INCOMPLETE, so the scan retries: the trigger made
//     the retry due, unless it came while the queue was still recording the
//     attempt's end. nudge asks again each second for nudgeFor, which only
//     makes that retry due; when an answer names another scan (the retries
//     were used up, the trigger queued a new scan) nudge waits on that one and
//     stops asking. After nudgeFor it returns the last attempt.
func nudge(ctx context.Context, e *env, c discoveryv1.DiscoveryServiceClient, t *discoveryv1.ScanTicket,
	endedBefore map[string]bool) (*discoveryv1.Run, *discoveryv1.ScanTicket, error) {
	deadline := time.Now().Add(nudgeFor)
	for {
		cctx, cancel := e.callCtx(ctx)
		resp, err := c.ListRuns(cctx, &discoveryv1.ListRunsRequest{ScanId: t.GetScanId(), PageSize: 500})
		cancel()
		if err != nil {
			return nil, nil, err
		}
		runs := resp.GetRuns() // newest first
		if len(runs) == 0 {
			return nil, t, nil // queued, not started yet
		}
		last := runs[0]
		if !endedBefore[last.GetRunId()] {
			return nil, t, nil // an attempt after the trigger: wait for it
		}
		if !discovery.Retried(last) || time.Now().After(deadline) {
			return last, nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("discovery: waiting for scan %s: %w", t.GetScanId(), ctx.Err())
		case <-time.After(time.Second):
		}
		cctx, cancel = e.callCtx(ctx)
		again, err := c.TriggerScan(cctx, &discoveryv1.TriggerScanRequest{ServerId: t.GetServerId(), AudienceClass: t.GetAudienceClass()})
		cancel()
		if err != nil {
			return nil, nil, err
		}
		for _, n := range again.GetScans() {
			if n.GetAudienceClass() == t.GetAudienceClass() && n.GetScanId() != t.GetScanId() {
				return nil, n, nil // a new scan: wait for its first attempt
			}
		}
	}
}

// scanVerdict says, on stderr, how each waited attempt ended when it did
// not activate, and returns [errNotActivated] then.
func scanVerdict(e *env, runs []*discoveryv1.Run) error {
	failed := 0
	for _, r := range runs {
		if discovery.Activated(r) {
			continue
		}
		failed++
		fmt.Fprintf(e.stderr, "%s as %s: attempt %d of scan %s ended %s (%s)", r.GetServerId(), r.GetAudienceClass(),
			r.GetAttempt(), r.GetScanId(), short(r.GetState()), short(r.GetReason()))
		if r.GetDetail() != "" {
			fmt.Fprintf(e.stderr, ": %s", r.GetDetail())
		}
		fmt.Fprintln(e.stderr)
		if discovery.Retried(r) {
			fmt.Fprintf(e.stderr, "  retries continue: discovery retries the scan with backoff (after its last attempt, at the next refresh); follow them with `toolcrib discovery runs --scan %s`\n", r.GetScanId())
		} else {
			fmt.Fprintln(e.stderr, "  not retried: the scan ended; fix the cause and scan again")
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w (%d of %d)", errNotActivated, failed, len(runs))
	}
	return nil
}

// runsCommand is `toolcrib discovery runs`.
func runsCommand(e *env) *cobra.Command {
	var server, audience, scanID, state string
	var limit int
	return withFlags(&cobra.Command{
		Use:   "runs",
		Short: "list discovery runs, newest first",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
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
			out, err := listRuns(ctx, e, c, req, limit)
			if err != nil {
				return err
			}
			return e.output(out, func(w *tabwriter.Writer) { runTable(w, out.GetRuns()) })
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&server, "server", "", "only runs of this server")
		fs.StringVar(&audience, "audience", "", "only runs as this audience class")
		fs.StringVar(&scanID, "scan", "", "only attempts of this scan")
		fs.StringVar(&state, "state", "", "only runs in these states, comma-separated (e.g. INCOMPLETE,QUARANTINED)")
		fs.IntVar(&limit, "limit", 50, "most runs to print")
	})
}

// listRuns pages through ListRuns until limit runs or the end.
func listRuns(ctx context.Context, e *env, c discoveryv1.DiscoveryServiceClient, req *discoveryv1.ListRunsRequest, limit int) (*discoveryv1.ListRunsResponse, error) {
	out := &discoveryv1.ListRunsResponse{}
	for len(out.Runs) < limit {
		req.PageSize = int32(min(limit-len(out.Runs), 500))
		cctx, cancel := e.callCtx(ctx)
		resp, err := c.ListRuns(cctx, req)
		cancel()
		if err != nil {
			return nil, err
		}
		out.Runs = append(out.Runs, resp.GetRuns()...)
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	return out, nil
}

// runCommand is `toolcrib discovery run`.
func runCommand(e *env) *cobra.Command {
	var pages bool
	return withFlags(&cobra.Command{
		Use:   "run <run-id>",
		Short: "show one run, with its pages",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
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
	}, func(fs *pflag.FlagSet) {
		fs.BoolVar(&pages, "pages", true, "show the pages read")
	})
}

// snapshotCommand is `toolcrib discovery snapshot`.
func snapshotCommand(e *env) *cobra.Command {
	var generation int64
	var raw bool
	return withFlags(&cobra.Command{
		Use:   "snapshot <server-id> <audience-class>",
		Short: "show the active snapshot (or one generation) of a server as an audience class",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
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
	}, func(fs *pflag.FlagSet) {
		fs.Int64Var(&generation, "generation", 0, "a generation; 0 shows the active one")
		fs.BoolVar(&raw, "raw", false, "print each tool's raw JSON")
	})
}

// generationsCommand is `toolcrib discovery generations`.
func generationsCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "generations <server-id> <audience-class>",
		Short: "list the generations of a server as an audience class, newest first",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
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
			return e.output(out, func(w *tabwriter.Writer) { generationTable(w, out.GetGenerations()) })
		},
	}
}

func generationTable(w *tabwriter.Writer, gens []*discoveryv1.Generation) {
	fmt.Fprintln(w, "GEN\tSTATE\tACTIVE\tREVISION\tTOOLS\tCOMMITTED\tFRESH UNTIL\tBOUND UNTIL\tPAGE ROOT")
	for _, g := range gens {
		fmt.Fprintf(w, "%d\t%s\t%v\t%s\t%d\t%s\t%s\t%s\t%s\n", g.GetGeneration(), short(g.GetState()), g.GetActive(),
			orDash(g.GetSourceRevision()), g.GetToolCount(), when(g.GetCommittedAt()), when(g.GetExpiresAt()),
			when(g.GetBoundUntil()), shortDigest(g.GetPageRoot()))
	}
}

// rollbackCommand is `toolcrib discovery rollback`.
func rollbackCommand(e *env) *cobra.Command {
	var expected, to int64
	var reason string
	return withFlags(&cobra.Command{
		Use:   "rollback <server-id> <audience-class>",
		Short: "move the active pointer back to an older fresh generation (or close the server when none is fresh)",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
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
				fmt.Fprintf(w, "note:\tthe lease service freezes issuance for this server on the move; resume it with toolcrib lease freeze --resume once the server is trusted again\n")
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.Int64Var(&expected, "expected", 0, "the generation you see active now (required; compare-and-swap)")
		fs.Int64Var(&to, "to", 0, "target generation; 0 means the newest older one that is still fresh")
		fs.StringVar(&reason, "reason", "", "why, recorded in the catalog receipt")
	})
}

// closeCommand is `toolcrib discovery close`.
func closeCommand(e *env) *cobra.Command {
	var expected int64
	var reason string
	return withFlags(&cobra.Command{
		Use:   "close <server-id> <audience-class>",
		Short: "close the active pointer (admission answers SERVER_CLOSED; lease issuance for the server freezes)",
		Long: "close moves the active pointer of (server, audience class) to CLOSED by compare-and-swap from --expected,\n" +
			"as a rollback that finds no fresh generation does: admission answers SERVER_CLOSED for its tools and the\n" +
			"lease service freezes issuance for the server until `toolcrib lease freeze --resume`. A platform admin or\n" +
			"the server's owner (for its own tenant's class) may close. A new generation from a later scan reopens it.",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := needArgs(args, 2, "<server-id> <audience-class>"); err != nil {
				return err
			}
			if expected < 1 {
				return errors.New("--expected is required: the generation you see active now")
			}
			if reason == "" {
				return errors.New("--reason is required: it is recorded with the move")
			}
			c, err := e.discoveryClient()
			if err != nil {
				return err
			}
			cctx, cancel := e.callCtx(ctx)
			defer cancel()
			resp, err := c.ClosePointer(cctx, &discoveryv1.ClosePointerRequest{ServerId: args[0], AudienceClass: args[1],
				ExpectedGeneration: expected, Reason: reason})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				p, r := resp.GetPointer(), resp.GetReceipt()
				fmt.Fprintf(w, "pointer:\t%s/%s now %s at generation %d\n", p.GetServerId(), p.GetAudienceClass(),
					short(p.GetState()), p.GetGeneration())
				fmt.Fprintf(w, "receipt:\t%s %s at %s\n", short(r.GetMove()), r.GetReceiptId(), when(r.GetAcceptedAt()))
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.Int64Var(&expected, "expected", 0, "the generation you see active now (required; compare-and-swap)")
		fs.StringVar(&reason, "reason", "", "why (required), recorded with the move")
	})
}

// discoveryWatchCommand is `toolcrib discovery watch`.
func discoveryWatchCommand(e *env) *cobra.Command {
	var from int64
	var beats bool
	return withFlags(&cobra.Command{
		Use:   "watch",
		Short: "stream active-pointer changes as they commit (Ctrl-C to stop)",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
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
	}, func(fs *pflag.FlagSet) {
		fs.Int64Var(&from, "from", 0, "send changes after this revision; 0 sends every change still kept")
		fs.BoolVar(&beats, "heartbeats", false, "print heartbeats too")
	})
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
		gen := runGeneration(r)
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.GetRunId(), r.GetScanId(), r.GetAttempt(), r.GetServerId(),
			r.GetAudienceClass(), short(r.GetState()), short(r.GetReason()), gen, r.GetPageCount(), r.GetToolCount(),
			short(r.GetTrigger()), when(r.GetStartedAt()))
	}
}

// runGeneration is a run's GEN column: the generation it committed, or
// for an UNCHANGED run the active generation it proved again ("1 confirmed"),
// else "-".
func runGeneration(r *discoveryv1.Run) string {
	switch {
	case r.GetGeneration() > 0:
		return strconv.FormatInt(r.GetGeneration(), 10)
	case r.GetConfirmedGeneration() > 0:
		return strconv.FormatInt(r.GetConfirmedGeneration(), 10) + " confirmed"
	}
	return "-"
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
	if c := r.GetComparison(); c != nil {
		counts := func(d *discoveryv1.ToolDiff) string {
			return fmt.Sprintf("%d missing, %d extra, %d changed", d.GetMissingCount(), d.GetExtraCount(), d.GetChangedCount())
		}
		if d := c.GetAgainstStatic(); d != nil {
			fmt.Fprintf(w, "vs static list:\tversion %d: %s (toolcrib rollout diff --run %s)\n", c.GetStaticListVersion(), counts(d), r.GetRunId())
		}
		if d := c.GetAgainstPrevious(); d != nil {
			fmt.Fprintf(w, "vs previous:\tgeneration %d: %s\n", c.GetPreviousGeneration(), counts(d))
		}
	}
	if len(r.GetPages()) > 0 {
		fmt.Fprintln(w, "\nPAGE\tCURSOR IN\tCURSOR OUT\tNEXT\tREVISION\tTOOLS\tBYTES\tDIGEST")
		for _, p := range r.GetPages() {
			fmt.Fprintf(w, "%d\t%s\t%s\t%v\t%s\t%d\t%d\t%s\n", p.GetIndex(), orDash(p.GetCursorIn()), orDash(p.GetCursorOut()),
				p.GetHasNext(), orDash(p.GetRevision()), p.GetToolCount(), p.GetBytes(), shortDigest(p.GetPageDigest()))
		}
	}
}

// discoveryGroup is `toolcrib discovery …`.
func discoveryGroup(e *env) *cobra.Command {
	return group("discovery", "scans, runs, snapshots, generations and the active pointer",
		scanCommand(e), runsCommand(e), runCommand(e), snapshotCommand(e), generationsCommand(e), rollbackCommand(e), closeCommand(e), discoveryWatchCommand(e))
}
