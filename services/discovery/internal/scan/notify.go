package scan

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

// Reasons a `notifications/tools/list_changed` queued no scan of its own
// (the `reason` label of toolcrib_discovery_suppressed_notifications_total).
const (
	// SuppressedCoalesced: a notification-triggered scan of the pair was
	// already about to be queued; the notification is answered by it.
	SuppressedCoalesced = "coalesced"
	// SuppressedRateLimited: the pair's notification-triggered scan is
	// waiting out the rate limit; the notification is answered by it.
	SuppressedRateLimited = "rate_limited"
)

// historyDepth bounds how many notification-triggered runs the rate limit
// reads: the backoff stops doubling after that many fruitless ones.
const historyDepth = 16

// metrics are the scanner's Prometheus metrics.
type metrics struct {
	suppressed *prometheus.CounterVec
	listeners  prometheus.Gauge
	relists    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolcrib_discovery_suppressed_notifications_total",
			Help: "notifications/tools/list_changed that queued no scan of their own, by reason (coalesced, rate_limited).",
		}, []string{"reason"}),
		listeners: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolcrib_discovery_listeners",
			Help: "Listening connections (one per server and audience class that declared tools.listChanged) held by this process.",
		}),
		relists: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolcrib_discovery_relists_total",
			Help: "Walks a scan started again on its session because a notifications/tools/list_changed arrived before the first page.",
		}),
	}
	for _, r := range []string{SuppressedCoalesced, SuppressedRateLimited} {
		m.suppressed.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.suppressed, m.listeners, m.relists)
	}
	return m
}

// gate debounces and rate-limits the scans that notifications (and
// resumed listeners) queue, per (server, audience class):
//
//   - debounce and coalesce: a pair's first notification waits
//     notifyDebounce for the rest of its burst; while a notification-
//     triggered scan of a pair is waiting to be queued, further
//     notifications of the pair queue nothing; they are
//     counted (metric, and the scan's run records how many it answers);
//   - rate limit: the scan is queued no sooner than NotifyMinInterval after
//     the previous notification-triggered scan of the pair started, and
//     that interval doubles (up to NotifyMaxInterval) for every one of the
//     pair's newest notification-triggered runs that found nothing new (the
//     same revision and page root, or another list_changed mid-scan). A
//     scan that makes a generation resets it. The history is read from the
//     run records, so it holds across processes and restarts;
//   - a scan queued while the pair's previous scan is still running would
//     be that running scan (one per pair): the gate keeps queuing until it
//     lands on a scan that has not started yet.
//
// So a server sends what it likes: its notification-triggered scans are at
// most 60 a minute, and far fewer while they keep finding nothing new.
type gate struct {
	s     *Scanner
	mu    sync.Mutex
	pairs map[[2]string]*gateState
}

type gateState struct {
	pending    bool // a scan is being prepared (waiting or queuing)
	waiting    bool // in its rate-limit delay
	suppressed int  // notifications coalesced into the pending scan
}

func newGate(s *Scanner) *gate { return &gate{s: s, pairs: map[[2]string]*gateState{}} }

// heard takes one notification (trigger LIST_CHANGED) or a resumed
// listener (LISTEN_RESUMED) for the pair.
func (g *gate) heard(pair [2]string, trigger discoveryv1.ScanTrigger) {
	g.mu.Lock()
	st := g.pairs[pair]
	if st == nil {
		st = &gateState{}
		g.pairs[pair] = st
	}
	if st.pending {
		st.suppressed++
		reason := SuppressedCoalesced
		if st.waiting {
			reason = SuppressedRateLimited
		}
		g.mu.Unlock()
		g.s.metrics.suppressed.WithLabelValues(reason).Inc()
		return
	}
	st.pending = true
	g.mu.Unlock()
	first := time.Now()
	g.s.background.Go(func() { g.queue(pair, st, trigger, first) })
}

// delay is how long the pair's next notification-triggered scan must
// wait from now.
func (g *gate) delay(ctx context.Context, pair [2]string) time.Duration {
	cfg := g.s.cfg
	h, err := g.s.store.NotificationHistory(ctx, pair[0], pair[1], historyDepth)
	if err != nil {
		// Without the history, wait the longest: a storm must stay bounded.
		g.s.lg.WarnContext(ctx, "read the notification history", "server", pair[0], "audience_class", pair[1], "error", err)
		return cfg.NotifyMaxInterval
	}
	if h.LastStarted.IsZero() {
		return 0
	}
	interval := cfg.NotifyMinInterval
	for range h.Fruitless {
		if interval >= cfg.NotifyMaxInterval {
			break
		}
		interval *= 2
	}
	interval = min(interval, cfg.NotifyMaxInterval)
	return time.Until(h.LastStarted.Add(interval))
}

// queue waits out the rate limit and queues the pair's scan.
func (g *gate) queue(pair [2]string, st *gateState, trigger discoveryv1.ScanTrigger, first time.Time) {
	s := g.s
	ctx := s.bg
	defer func() {
		g.mu.Lock()
		st.pending, st.waiting = false, false
		g.mu.Unlock()
	}()
	// Debounce: a server often says list_changed several times for one
	// change (once per tool it touched); wait for the burst to end, so the
	// scan does not start in its middle and end INCOMPLETE on the rest.
	// Notifications meanwhile are coalesced into this scan.
	if !sleep(ctx, notifyDebounce) {
		return
	}
	delayed := false
	if d := g.delay(ctx, pair); d > 0 {
		delayed = true
		g.mu.Lock()
		st.waiting = true
		g.mu.Unlock()
		if !sleep(ctx, d) {
			return
		}
		g.mu.Lock()
		st.waiting = false
		g.mu.Unlock()
	}
	poll := 250 * time.Millisecond
	for {
		g.mu.Lock()
		n := st.suppressed
		g.mu.Unlock()
		args := ScanArgs{ServerID: pair[0], AudienceClass: pair[1], Trigger: trigger.String(), SuppressedNotifications: n}
		if delayed {
			args.NotificationDelayMs = time.Since(first).Milliseconds()
		}
		res, err := s.river.Insert(ctx, args, &river.InsertOpts{MaxAttempts: s.cfg.MaxAttempts})
		if err == nil && !(res.UniqueSkippedAsDuplicate && res.Job.State == rivertype.JobStateRunning) {
			g.mu.Lock()
			st.suppressed -= n
			g.mu.Unlock()
			if res.UniqueSkippedAsDuplicate {
				s.metrics.suppressed.WithLabelValues(SuppressedCoalesced).Inc()
			}
			return
		}
		if err != nil {
			s.lg.WarnContext(ctx, "queue a scan after list_changed", "server", pair[0], "audience_class", pair[1], "error", err)
		}
		if !sleep(ctx, poll) {
			return
		}
		poll = min(2*poll, 5*time.Second)
	}
}

// notifyDebounce is how long the gate waits after a pair's first
// notification before it queues the scan (within the 1 s in which a change
// heard after a commit must start a rescan).
const notifyDebounce = 100 * time.Millisecond

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
