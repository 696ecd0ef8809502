package scan

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
)

// ScanArgs are the arguments of a `discovery_scan` job.
type ScanArgs struct {
	ServerID      string `json:"server_id" river:"unique"`
	AudienceClass string `json:"audience_class" river:"unique"`
	// Trigger is the ScanTrigger name; not part of the uniqueness.
	Trigger string `json:"trigger"`
	// SuppressedNotifications and NotificationDelayMs are what the
	// notification gate held back (see [gate]); recorded by the first
	// attempt's run.
	SuppressedNotifications int   `json:"suppressed_notifications,omitempty"`
	NotificationDelayMs     int64 `json:"notification_delay_ms,omitempty"`
}

// Kind implements river.JobArgs.
func (ScanArgs) Kind() string { return "discovery_scan" }

// InsertOpts implements river.JobArgsWithInsertOpts: one queued or running
// scan per pair.
func (ScanArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// RefreshArgs are the arguments of the periodic `discovery_refresh` job.
type RefreshArgs struct{}

// Kind implements river.JobArgs.
func (RefreshArgs) Kind() string { return "discovery_refresh" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RefreshArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateScheduled,
	}}}
}

// RetentionArgs are the arguments of the periodic `discovery_retention` job.
type RetentionArgs struct{}

// Kind implements river.JobArgs.
func (RetentionArgs) Kind() string { return "discovery_retention" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RetentionArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateScheduled,
	}}}
}

// GuardArgs are the arguments of the periodic `discovery_rollout_guard` job:
// one rollout-guard pass (see package guard). Unique while queued or
// running, and only River's leader inserts periodic jobs, so one process
// runs the guard at a time.
type GuardArgs struct{}

// Kind implements river.JobArgs.
func (GuardArgs) Kind() string { return "discovery_rollout_guard" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (GuardArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: GuardQueue, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateScheduled,
	}}}
}

type guardWorker struct {
	river.WorkerDefaults[GuardArgs]
	s *Scanner
}

func (w *guardWorker) Work(ctx context.Context, _ *river.Job[GuardArgs]) error {
	return w.s.cfg.Guard(ctx)
}

type scanWorker struct {
	river.WorkerDefaults[ScanArgs]
	s *Scanner
}

// errIncomplete makes River retry a scan that ended INCOMPLETE.
type errIncomplete struct{ reason discoveryv1.RunReason }

func (e errIncomplete) Error() string { return "scan incomplete: " + e.reason.String() }

func (w *scanWorker) Work(ctx context.Context, job *river.Job[ScanArgs]) error {
	s := w.s
	a := job.Args
	trigger := discoveryv1.ScanTrigger(discoveryv1.ScanTrigger_value[a.Trigger])
	nr := store.NewRun{ScanID: strconv.FormatInt(job.ID, 10), Attempt: job.Attempt,
		ServerID: a.ServerID, AudienceClass: a.AudienceClass, Trigger: trigger, Worker: s.cfg.Worker, MarkLost: true}
	if job.Attempt <= 1 {
		nr.SuppressedNotifications, nr.NotificationDelay = a.SuppressedNotifications, time.Duration(a.NotificationDelayMs)*time.Millisecond
	}
	b, berr := s.readBinding(ctx, a, &nr)
	// The pair's lock (on the process's lock session, see [pairLocks]),
	// the run's start and the pointer's view in one round trip; holding
	// the lock, any unfinished run of the pair is dead: it is marked lost
	// as this one starts. The scan is cancelled if the lock is lost.
	ctx, cancelScan := context.WithCancelCause(ctx)
	defer cancelScan(nil)
	key := pairKey(a.ServerID, a.AudienceClass)
	var (
		runID string
		view  store.ScanView
	)
	hold, err := s.locks.start(ctx, key, cancelScan, func(ctx context.Context, conn store.Session) (bool, error) {
		var locked bool
		var err error
		runID, view, locked, err = s.store.StartScan(ctx, conn, key, nr)
		return locked, err
	})
	if err != nil {
		return fmt.Errorf("scan lock: %w", err)
	}
	if hold == nil {
		return river.JobSnooze(time.Second)
	}
	defer s.locks.release(ctx, hold)
	// A commit completes the job in its own transaction (store.Commit's
	// JobID) rather than in River's asynchronous batch, so a TriggerScan
	// right after the run ended queues a new scan instead of finding this
	// one "already queued".
	out := s.scan(ctx, runID, job.ID, a, b, berr, view)
	switch out.disposition {
	case done:
		return nil
	case cancel:
		return river.JobCancel(errIncomplete{reason: out.reason})
	default:
		return errIncomplete{reason: out.reason}
	}
}

// readBinding is the scan's first registry read (step 1), made before it
// takes the pair's lock and starts its run so that the run's row is written with the tenant and policy
// epoch it read: the tenant's users see the running run (ListRuns, GetRun)
// and no other tenant's do, without a statement of its own. The run's
// protocol version, identity and trust digests are written with its end.
func (s *Scanner) readBinding(ctx context.Context, a ScanArgs, nr *store.NewRun) (registryclient.Binding, error) {
	b, err := s.reg.Binding(ctx, a.ServerID, a.AudienceClass)
	if err == nil {
		nr.TenantID, nr.PolicyEpoch = b.TenantID, b.PolicyEpoch
	}
	return b, err
}

// pairKey is the pair's session advisory lock, held for the scan's whole
// duration on the process's lock session ([pairLocks]); a killed
// process's session (and its locks) dies with it.
func pairKey(server, aud string) int64 {
	h := fnv.New64a()
	h.Write([]byte("toolcrib.discovery.scan\x00" + server + "\x00" + aud))
	return int64(h.Sum64())
}

type refreshWorker struct {
	river.WorkerDefaults[RefreshArgs]
	s *Scanner
}

func (w *refreshWorker) Work(ctx context.Context, _ *river.Job[RefreshArgs]) error {
	return w.s.refreshDue(ctx)
}

type retentionWorker struct {
	river.WorkerDefaults[RetentionArgs]
	s *Scanner
}

func (w *retentionWorker) Work(ctx context.Context, _ *river.Job[RetentionArgs]) error {
	s := w.s
	now := time.Now()
	grace := max(s.cfg.RetentionGrace, 0)
	gone, err := s.store.Retain(ctx, now, now.Add(-grace), now.Add(-s.cfg.RunRetention))
	if err != nil {
		return err
	}
	if len(gone) > 0 {
		s.lg.InfoContext(ctx, "retention deleted generations", "count", len(gone))
	}
	if _, err := s.log.Compact(ctx, now.Add(-s.cfg.ChangeLogRetention), 1000); err != nil {
		return errors.Join(errors.New("compact change log"), err)
	}
	return nil
}

// QueueDepth counts the scan jobs that still have work ahead of them, by
// River state (the /metrics queue gauge).
func (s *Scanner) QueueDepth(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT state::text, count(*) FROM river_job
WHERE queue = $1 AND kind = $2 AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled') GROUP BY state`,
		Queue, ScanArgs{}.Kind())
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}
