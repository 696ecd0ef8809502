package scan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/secretref"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/internal/coalesce"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
	"github.com/toolcrib/toolcrib/services/discovery/validate"
)

// Queue is River's queue for discovery's jobs.
const Queue = "discovery"

// GuardQueue is the rollout guard's own queue (one worker per process), so
// its passes never wait behind scans that fill the workers.
const GuardQueue = "discovery_guard"

// Config tunes the scanner; zero fields take the defaults in parentheses.
type Config struct {
	// Workers is how many scans run at once in this process (16).
	Workers int
	// ScanTimeout bounds one scan (5m); RescueAfter is when River retries a
	// scan whose worker vanished (ScanTimeout + 1m; must exceed
	// ScanTimeout).
	ScanTimeout time.Duration
	RescueAfter time.Duration
	// RefreshInterval is the default time between scans of a pair (15m);
	// RefreshTick is how often due pairs are looked for (1m).
	RefreshInterval time.Duration
	RefreshTick     time.Duration
	// RegistryStallTimeout is how long the registry's Watch may stay silent
	// (no change, no heartbeat: the registry sends one every second by
	// default) before it is dropped and resumed (10s).
	RegistryStallTimeout time.Duration
	// RetryBase and RetryMax shape the backoff of INCOMPLETE scans (1s,
	// 5m); MaxAttempts caps the attempts of one scan (10).
	RetryBase   time.Duration
	RetryMax    time.Duration
	MaxAttempts int
	// SnapshotTTL is how long a snapshot proves its catalog (1h).
	SnapshotTTL time.Duration
	// Linger keeps a session open after a commit to hear list_changed (5s;
	// negative disables).
	Linger time.Duration
	// RetentionInterval is how often retention runs (10m); RetentionGrace
	// is how long an expired generation is kept (24h; negative: none);
	// ChangeLogRetention how long change-log entries are kept (24h).
	RetentionInterval  time.Duration
	RetentionGrace     time.Duration
	ChangeLogRetention time.Duration
	// RunRetention is how long finished runs are kept unless a retained
	// snapshot came from them (7 days).
	RunRetention time.Duration
	// FetchCooldown and FetchPollInterval tune River's fetching (20ms, 1s).
	FetchCooldown     time.Duration
	FetchPollInterval time.Duration
	// Crawl bounds each crawl; Limits bound each tool.
	Crawl  crawl.Options
	Limits validate.Limits
	// LookupEnv resolves `env:` secret references (os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// Secrets confines secret references (the zero policy refuses all).
	Secrets secretref.Policy
	// Worker names this process in runs (`host:pid`).
	Worker string
	// MaxListeners bounds the listening connections of this process (one
	// per server and audience class that declared tools.listChanged; 256;
	// negative disables listening). ListenSweep is how often a process
	// looks for pairs to listen to (5s), ListenPing how often a listening
	// session is pinged (30s), ListenBackoffMax the longest wait before
	// opening a lost one again (1m).
	MaxListeners     int
	ListenSweep      time.Duration
	ListenPing       time.Duration
	ListenBackoffMax time.Duration
	// NotifyMinInterval is the least time between two notification-
	// triggered scans of a pair (1s); it doubles for every one that found
	// nothing new, up to NotifyMaxInterval (5m). See [gate].
	NotifyMinInterval time.Duration
	NotifyMaxInterval time.Duration
	// Metrics receives the scanner's Prometheus metrics; nil registers
	// them nowhere.
	Metrics prometheus.Registerer
	// Guard is one rollout-guard pass, run every GuardInterval as the
	// periodic unique job `discovery_rollout_guard`; nil runs none.
	Guard         func(context.Context) error
	GuardInterval time.Duration
	// AutoScans queues scans by itself: on registry changes (watch) and
	// periodically (refresh). Tests that drive every scan turn it off.
	AutoScans bool
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Workers <= 0 {
		c.Workers = 16
	}
	def(&c.ScanTimeout, 5*time.Minute)
	def(&c.RescueAfter, c.ScanTimeout+time.Minute)
	if c.RescueAfter <= c.ScanTimeout {
		c.RescueAfter = c.ScanTimeout + time.Second
	}
	def(&c.RefreshInterval, 15*time.Minute)
	def(&c.RefreshTick, time.Minute)
	def(&c.RegistryStallTimeout, 10*time.Second)
	def(&c.RetryBase, time.Second)
	def(&c.RetryMax, 5*time.Minute)
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 10
	}
	def(&c.SnapshotTTL, time.Hour)
	def(&c.Linger, 5*time.Second)
	def(&c.RetentionInterval, 10*time.Minute)
	def(&c.RetentionGrace, 24*time.Hour)
	def(&c.ChangeLogRetention, 24*time.Hour)
	def(&c.RunRetention, 7*24*time.Hour)
	def(&c.FetchCooldown, 20*time.Millisecond)
	def(&c.FetchPollInterval, time.Second)
	if c.MaxListeners == 0 {
		c.MaxListeners = 256
	}
	def(&c.ListenSweep, 5*time.Second)
	def(&c.ListenPing, 30*time.Second)
	def(&c.ListenBackoffMax, time.Minute)
	def(&c.NotifyMinInterval, time.Second)
	def(&c.NotifyMaxInterval, 5*time.Minute)
	def(&c.GuardInterval, 2*time.Second)
	c.NotifyMaxInterval = max(c.NotifyMaxInterval, c.NotifyMinInterval)
	if c.LookupEnv == nil {
		c.LookupEnv = os.LookupEnv
	}
	if c.Worker == "" {
		host, _ := os.Hostname()
		c.Worker = host + ":" + strconv.Itoa(os.Getpid())
	}
	return c
}

// Scanner owns the job queue client and runs scans.
type Scanner struct {
	cfg   Config
	pool  *pgxpool.Pool
	store *store.Store
	log   *changelog.Log
	reg   registryclient.Registry
	lg    *slog.Logger
	river *river.Client[pgx.Tx]

	classes fresh[*registryv1.AudienceClass]

	lingering  sync.WaitGroup
	stopLinger chan struct{}
	stopOnce   sync.Once

	// bg lives until Run ends (stopBg); background holds what runs on it:
	// the notification gate's and the listeners' goroutines.
	bg         context.Context
	stopBg     context.CancelFunc
	background sync.WaitGroup
	gate       *gate
	listen     *listeners
	// locks holds the pair locks of this process's scans.
	locks   *pairLocks
	metrics *metrics
	// inserts coalesces the one-pair Enqueue calls made at the same moment
	// into one insert transaction.
	inserts *coalesce.Coalescer[enqueue, enqueued]
}

// New builds a scanner. pool must have room for a connection per worker,
// the lock session of the scans' pair locks ([pairLocks]), the group
// commits' and River's own (see [PoolSize], which leaves two per worker);
// nothing touches the database until [Scanner.Run].
func New(pool *pgxpool.Pool, st *store.Store, log *changelog.Log, reg registryclient.Registry, cfg Config, lg *slog.Logger) (*Scanner, error) {
	cfg = cfg.withDefaults()
	s := &Scanner{cfg: cfg, pool: pool, store: st, log: log, reg: reg, lg: lg, stopLinger: make(chan struct{}), metrics: newMetrics(cfg.Metrics)}
	s.bg, s.stopBg = context.WithCancel(context.Background())
	s.inserts = &coalesce.Coalescer[enqueue, enqueued]{Send: s.insert, Max: 256, InFlight: 2, Timeout: 30 * time.Second}
	s.gate, s.listen, s.locks = newGate(s), newListeners(s), newPairLocks(pool)
	workers := river.NewWorkers()
	river.AddWorker(workers, &scanWorker{s: s})
	river.AddWorker(workers, &refreshWorker{s: s})
	river.AddWorker(workers, &retentionWorker{s: s})
	river.AddWorker(workers, &guardWorker{s: s})
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:               store.Schema,
		Queues:               queues(cfg),
		Workers:              workers,
		JobTimeout:           cfg.ScanTimeout,
		RescueStuckJobsAfter: cfg.RescueAfter,
		MaxAttempts:          cfg.MaxAttempts,
		RetryPolicy:          &retryPolicy{base: cfg.RetryBase, max: cfg.RetryMax},
		FetchCooldown:        cfg.FetchCooldown,
		FetchPollInterval:    cfg.FetchPollInterval,
		Logger:               slog.New(atLeast{h: lg.Handler(), level: slog.LevelWarn}).With("component", "river"),
		ErrorHandler:         quietErrors{},
		SoftStopTimeout:      5 * time.Second,
		PeriodicJobs:         periodic(cfg),
	})
	if err != nil {
		return nil, fmt.Errorf("scan: river client: %w", err)
	}
	s.river = rc
	return s, nil
}

func queues(cfg Config) map[string]river.QueueConfig {
	q := map[string]river.QueueConfig{Queue: {MaxWorkers: cfg.Workers}}
	if cfg.Guard != nil {
		q[GuardQueue] = river.QueueConfig{MaxWorkers: 1}
	}
	return q
}

func periodic(cfg Config) []*river.PeriodicJob {
	jobs := []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(cfg.RetentionInterval),
		func() (river.JobArgs, *river.InsertOpts) { return RetentionArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true})}
	if cfg.AutoScans {
		jobs = append(jobs, river.NewPeriodicJob(river.PeriodicInterval(cfg.RefreshTick),
			func() (river.JobArgs, *river.InsertOpts) { return RefreshArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true}))
	}
	if cfg.Guard != nil {
		jobs = append(jobs, river.NewPeriodicJob(river.PeriodicInterval(cfg.GuardInterval),
			func() (river.JobArgs, *river.InsertOpts) { return GuardArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true}))
	}
	return jobs
}

// PoolSize is the pool size a scanner with n workers needs.
func PoolSize(workers int) int32 { return int32(2*workers + 8) }

// Migrate creates or upgrades River's tables in the discovery schema, under
// an advisory lock so concurrent processes migrate once.
func Migrate(ctx context.Context, pool *pgxpool.Pool, lg *slog.Logger) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: store.Schema,
		Logger: slog.New(atLeast{h: lg.Handler(), level: slog.LevelWarn})})
	if err != nil {
		return err
	}
	// Each River version migrates in its own transaction (some cannot share
	// one); a session lock on a connection of its own serializes processes.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	const key = "toolcrib.migrate.discovery.river"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", key); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtext($1))", key) }()
	res, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return err
	}
	for _, v := range res.Versions {
		lg.InfoContext(ctx, "migration applied", "schema", store.Schema, "set", "river", "migration", fmt.Sprintf("%03d_%s", v.Version, v.Name))
	}
	return nil
}

// Run works jobs (and watches the registry) until ctx ends, then stops
// River softly and waits for lingering sessions to close.
func (s *Scanner) Run(ctx context.Context) error {
	if err := s.river.Start(ctx); err != nil {
		return fmt.Errorf("scan: start river: %w", err)
	}
	done := make(chan error, 1)
	if s.cfg.AutoScans {
		go func() { done <- s.watchRegistry(ctx) }()
	}
	swept := make(chan struct{})
	go func() { defer close(swept); s.listen.sweepLoop(s.bg) }()
	<-ctx.Done()
	s.stopOnce.Do(func() { close(s.stopLinger) })
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := s.river.Stop(stopCtx)
	s.locks.close()
	s.lingering.Wait()
	s.stopBg()
	<-swept
	s.background.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Client is the River client (for inserts).
func (s *Scanner) Client() *river.Client[pgx.Tx] { return s.river }

// Ticket is one queued scan.
type Ticket struct {
	ServerID, AudienceClass string
	ScanID                  string
	AlreadyQueued           bool
}

// Enqueue queues scans of pairs; a pair already queued (or running) is not
// queued twice and its ticket says so. Calls of one pair made at the same
// moment (TriggerScan from many callers) share one insert transaction.
func (s *Scanner) Enqueue(ctx context.Context, trigger discoveryv1.ScanTrigger, pairs ...[2]string) ([]Ticket, error) {
	var queued []enqueued
	switch len(pairs) {
	case 0:
		return nil, nil
	case 1:
		q, err := s.inserts.Do(ctx, enqueue{trigger: trigger, pair: pairs[0]})
		if err != nil {
			return nil, err
		}
		queued = []enqueued{q}
	default:
		qs := make([]enqueue, len(pairs))
		for i, p := range pairs {
			qs[i] = enqueue{trigger: trigger, pair: p}
		}
		var err error
		if queued, err = s.insert(ctx, qs); err != nil {
			return nil, err
		}
	}
	out := make([]Ticket, len(queued))
	for i, q := range queued {
		out[i] = q.ticket
		// An on-demand scan should not wait out a retry backoff: a queued
		// scan that is waiting for its next attempt is made due now.
		if trigger == discoveryv1.ScanTrigger_SCAN_TRIGGER_MANUAL && q.ticket.AlreadyQueued &&
			(q.state == rivertype.JobStateRetryable || q.state == rivertype.JobStateScheduled) {
			if _, err := s.river.JobRetry(ctx, q.id); err != nil {
				s.lg.WarnContext(ctx, "make a queued scan due now", "scan", q.id, "error", err)
			}
		}
	}
	return out, nil
}

// enqueue is one pair to queue, enqueued its outcome.
type enqueue struct {
	trigger discoveryv1.ScanTrigger
	pair    [2]string
}

type enqueued struct {
	ticket Ticket
	id     int64
	state  rivertype.JobState
}

// insert queues scans with one River InsertMany (one transaction). A pair
// named twice is inserted once (River's unique insert cannot take one key
// twice in a statement); the later mention is answered as already queued,
// with the same job.
func (s *Scanner) insert(ctx context.Context, qs []enqueue) ([]enqueued, error) {
	first := make(map[[2]string]int, len(qs))
	var params []river.InsertManyParams
	slot := make([]int, len(qs))
	for i, q := range qs {
		if j, ok := first[q.pair]; ok {
			slot[i] = -1 - j
			continue
		}
		first[q.pair], slot[i] = i, len(params)
		params = append(params, river.InsertManyParams{Args: ScanArgs{ServerID: q.pair[0], AudienceClass: q.pair[1], Trigger: q.trigger.String()},
			InsertOpts: &river.InsertOpts{MaxAttempts: s.cfg.MaxAttempts}})
	}
	res, err := s.river.InsertMany(ctx, params)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		return nil, fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	if err != nil {
		return nil, fmt.Errorf("scan: queue: %w", err)
	}
	if len(res) != len(params) {
		return nil, fmt.Errorf("scan: queue: %d results for %d jobs", len(res), len(params))
	}
	out := make([]enqueued, len(qs))
	for i, q := range qs {
		if slot[i] < 0 {
			out[i] = out[-1-slot[i]]
			out[i].ticket.AlreadyQueued = true
			continue
		}
		r := res[slot[i]]
		out[i] = enqueued{ticket: Ticket{ServerID: q.pair[0], AudienceClass: q.pair[1], ScanID: strconv.FormatInt(r.Job.ID, 10),
			AlreadyQueued: r.UniqueSkippedAsDuplicate}, id: r.Job.ID, state: r.Job.State}
	}
	return out, nil
}

// retryPolicy is River's retry policy: base·2^(attempt-1), capped.
type retryPolicy struct{ base, max time.Duration }

func (b *retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	d := float64(b.base) * math.Pow(2, float64(max(job.Attempt-1, 0)))
	if d > float64(b.max) {
		d = float64(b.max)
	}
	return time.Now().Add(time.Duration(d))
}

// atLeast drops records below a level (River logs every job at info).
type atLeast struct {
	h     slog.Handler
	level slog.Level
}

func (a atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= a.level && a.h.Enabled(ctx, l)
}
func (a atLeast) Handle(ctx context.Context, r slog.Record) error { return a.h.Handle(ctx, r) }
func (a atLeast) WithAttrs(as []slog.Attr) slog.Handler {
	return atLeast{h: a.h.WithAttrs(as), level: a.level}
}
func (a atLeast) WithGroup(g string) slog.Handler {
	return atLeast{h: a.h.WithGroup(g), level: a.level}
}

// quietErrors keeps River from logging INCOMPLETE scans as errors: the run
// record already says why, and the retry is expected.
type quietErrors struct{}

func (quietErrors) HandleError(context.Context, *rivertype.JobRow, error) *river.ErrorHandlerResult {
	return nil
}

func (quietErrors) HandlePanic(_ context.Context, _ *rivertype.JobRow, _ any, _ string) *river.ErrorHandlerResult {
	return nil
}

// audienceClass reads a class from a fetch started at or after `after`.
func (s *Scanner) audienceClass(ctx context.Context, name string, after time.Time) (*registryv1.AudienceClass, error) {
	return s.classes.get(ctx, name, after, func(ctx context.Context) (*registryv1.AudienceClass, error) {
		return s.reg.AudienceClass(ctx, name)
	})
}

// recentClass is how old a class read may be for [Scanner.Trigger] to queue
// a scan the class covers without reading the registry again.
const recentClass = 5 * time.Second

// Trigger errors.
var (
	ErrNotReady      = errors.New("scan: the job queue is not migrated yet")
	ErrUnknownServer = errors.New("scan: unknown server")
	ErrUnknownClass  = errors.New("scan: unknown audience class")
	ErrNotCovered    = errors.New("scan: the audience class does not cover the server")
)

// TriggerError is a refused Trigger: Err is [ErrUnknownServer],
// [ErrUnknownClass] or [ErrNotCovered] (errors.Is sees it), ServerID and
// AudienceClass what the request named.
type TriggerError struct {
	Err           error
	ServerID      string
	AudienceClass string
}

func (e *TriggerError) Error() string {
	return fmt.Sprintf("%v (server %q, audience class %q)", e.Err, e.ServerID, e.AudienceClass)
}

func (e *TriggerError) Unwrap() error { return e.Err }

// Trigger queues a MANUAL scan of a server as one audience class, or as
// every class covering it when audienceClass is empty.
func (s *Scanner) Trigger(ctx context.Context, serverID, audienceClass string) ([]Ticket, error) {
	// A class read a moment ago that covers the server is enough to queue
	// the scan: the scan re-reads the server and the class when it starts
	// (and ends NOT_REGISTERED if either is gone), so a recent read only
	// saves two registry calls per trigger. A refusal is always decided on
	// fresh reads.
	if audienceClass != "" {
		if c, ok := s.classes.recent(ctx, audienceClass, recentClass); ok && binding(c, serverID) != nil {
			return s.Enqueue(ctx, discoveryv1.ScanTrigger_SCAN_TRIGGER_MANUAL, [2]string{serverID, audienceClass})
		}
	}
	if _, err := s.reg.Server(ctx, serverID); err != nil {
		if errors.Is(err, registryclient.ErrNotFound) {
			return nil, &TriggerError{Err: ErrUnknownServer, ServerID: serverID, AudienceClass: audienceClass}
		}
		return nil, err
	}
	var pairs [][2]string
	if audienceClass != "" {
		c, err := s.audienceClass(ctx, audienceClass, time.Now())
		if err != nil {
			if errors.Is(err, registryclient.ErrNotFound) {
				return nil, &TriggerError{Err: ErrUnknownClass, ServerID: serverID, AudienceClass: audienceClass}
			}
			return nil, err
		}
		if binding(c, serverID) == nil {
			return nil, &TriggerError{Err: ErrNotCovered, ServerID: serverID, AudienceClass: audienceClass}
		}
		pairs = append(pairs, [2]string{serverID, audienceClass})
	} else {
		cs, err := s.reg.AudienceClasses(ctx, serverID)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if binding(c, serverID) != nil {
				pairs = append(pairs, [2]string{serverID, c.GetName()})
			}
		}
	}
	return s.Enqueue(ctx, discoveryv1.ScanTrigger_SCAN_TRIGGER_MANUAL, pairs...)
}

// Binding reads a server as an audience class reads it from the registry
// (see [registryclient.Registry.Binding]); the API checks a static tool
// list's pair and its owner with it.
func (s *Scanner) Binding(ctx context.Context, serverID, audienceClass string) (registryclient.Binding, error) {
	return s.reg.Binding(ctx, serverID, audienceClass)
}
