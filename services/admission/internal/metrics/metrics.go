package metrics

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/services/admission/internal/cache"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
	"github.com/toolcrib/toolcrib/services/admission/internal/receipts"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
)

// Namespace prefixes every admission metric: `toolcrib_admission_…`.
const Namespace = "toolcrib_admission"

// Metrics are admission's Prometheus metrics.
type Metrics struct {
	decisions *prometheus.CounterVec
	lookups   *prometheus.CounterVec
	rechecks  *prometheus.CounterVec
	// byReason and byLevel are the vectors' children, resolved once: a
	// label lookup per Check was a measurable share of a cached Check.
	byReason map[decision.Reason]prometheus.Counter
	byLevel  [3]prometheus.Counter
}

// Sources are what the gauges read at each scrape.
type Sources struct {
	// Heads gives each stream's newest heartbeat.
	Heads *replica.Heads
	// Pending is the count of receipts handed out and not yet stored.
	Pending func() int
	// ReceiptLookups counts GetReceipt lookups by answer (nil: not
	// exported).
	ReceiptLookups func(receipts.Answer) int64
	// Now is the clock the heartbeat age is taken against; nil: time.Now.
	Now func() time.Time
}

// New creates admission's metrics and registers them on reg.
func New(reg prometheus.Registerer, src Sources) *Metrics {
	if src.Now == nil {
		src.Now = time.Now
	}
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "decisions_total",
			Help: "Check answers by reason (ALLOW or the deny reason).",
		}, []string{"reason"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "decision_cache_total",
			Help: "Check answers by where the preliminary decision came from: l1, l2 or miss (decided from the material, or before the cache by the request, tenant and freshness rules).",
		}, []string{"level"}),
		rechecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "rechecks_total",
			Help: "Cached ALLOWs re-decided from direct reads (--audit-rate), by result: allow, or deny (an unauthorized event reported to discovery).",
		}, []string{"result"}),
	}
	m.byReason = map[decision.Reason]prometheus.Counter{}
	for _, r := range append(slices.Clip(decision.Order), decision.Allow) {
		m.byReason[r] = m.decisions.WithLabelValues(ReasonLabel(r))
	}
	for _, l := range []cache.Level{cache.Miss, cache.L1, cache.L2} {
		m.byLevel[l] = m.lookups.WithLabelValues(l.String())
	}
	reg.MustRegister(m.decisions, m.lookups, m.rechecks)
	m.rechecks.WithLabelValues("allow")
	m.rechecks.WithLabelValues("deny")
	for _, s := range []changelog.HeadStream{changelog.RegistryHead, changelog.DiscoveryHead} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "heartbeat_age_seconds", ConstLabels: prometheus.Labels{"stream": s.String()},
			Help: "Age of the newest heartbeat of the stream's Watch; +Inf while it never caught up. Past the validity window every Check answers STALE_POLICY.",
		}, func() float64 {
			b := src.Heads.Beat(s)
			if b.IsZero() {
				return math.Inf(1)
			}
			return src.Now().Sub(b).Seconds()
		}))
	}
	if src.Pending != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "receipts_pending",
			Help: "Receipts handed out with a Check answer and not yet stored in Postgres.",
		}, func() float64 { return float64(src.Pending()) }))
	}
	if src.ReceiptLookups != nil {
		for _, a := range []receipts.Answer{receipts.FromMemory, receipts.FromPostgres, receipts.AfterWait, receipts.NotFound} {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Namespace: Namespace, Name: "receipt_lookups_total", ConstLabels: prometheus.Labels{"answer": a.String()},
				Help: "GetReceipt lookups by answer: memory (queued or recently stored here), postgres, after_wait (another replica stored it during the miss wait), not_found (after the miss wait).",
			}, func() float64 { return float64(src.ReceiptLookups(a)) }))
		}
	}
	return m
}

// Rechecked counts one re-check of a cached ALLOW (the
// grpcapi.Options.Audited hook).
func (m *Metrics) Rechecked(denied bool) {
	if m == nil {
		return
	}
	if denied {
		m.rechecks.WithLabelValues("deny").Inc()
		return
	}
	m.rechecks.WithLabelValues("allow").Inc()
}

// Decided counts one answered Check (the grpcapi.Options.Decided hook).
func (m *Metrics) Decided(r decision.Reason, l cache.Level) {
	if m == nil {
		return
	}
	if c, ok := m.byReason[r]; ok {
		c.Inc()
	} else {
		m.decisions.WithLabelValues(ReasonLabel(r)).Inc()
	}
	if l >= 0 && int(l) < len(m.byLevel) {
		m.byLevel[l].Inc()
	} else {
		m.lookups.WithLabelValues(l.String()).Inc()
	}
}

// ReasonLabel is the label value of a reason, e.g. `STALE_POLICY`.
func ReasonLabel(r decision.Reason) string {
	return strings.TrimPrefix(r.String(), "DECISION_REASON_")
}

// Freshness polls heads every interval until ctx ends and logs each change
// of the replica's state: "replica caught up" the first time both streams
// are fresh, "replica stale" (with which stream is behind) when it stops
// being fresh, "replica resynced" (with how long it was stale) when it is
// fresh again. Nothing is logged while the state holds.
func Freshness(ctx context.Context, heads *replica.Heads, logger *slog.Logger, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var f freshLog
	for {
		f.observe(heads, logger, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// freshLog is the state Freshness logs the changes of.
type freshLog struct {
	fresh, everFresh bool
	staleSince       time.Time
}

func (f *freshLog) observe(heads *replica.Heads, logger *slog.Logger, now time.Time) {
	ok, why := heads.Fresh()
	switch {
	case ok == f.fresh:
	case ok && !f.everFresh:
		logger.Info("replica caught up")
	case ok:
		logger.Info("replica resynced", "stale_for", now.Sub(f.staleSince).Round(time.Millisecond).String())
	default:
		logger.Warn("replica stale", "why", why)
		f.staleSince = now
	}
	f.fresh, f.everFresh = ok, f.everFresh || ok
}
