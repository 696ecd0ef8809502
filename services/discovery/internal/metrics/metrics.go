package metrics

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

// Namespace prefixes every discovery metric: `toolcrib_discovery_…`.
const Namespace = "toolcrib_discovery"

// Metrics are discovery's Prometheus metrics.
type Metrics struct {
	runs         *prometheus.CounterVec
	scanDuration *prometheus.HistogramVec
	pages        prometheus.Histogram
	tools        prometheus.Histogram
	moves        *prometheus.CounterVec
	guard        *prometheus.CounterVec
}

// New creates discovery's metrics and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "runs_total",
			Help: "Discovery runs (scan attempts) that ended, by final state and reason (NONE when no fault).",
		}, []string{"state", "reason"}),
		scanDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "scan_duration_seconds",
			Help:    "Wall time of a discovery run from its start to its recorded end, by final state.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"state"}),
		pages: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "scan_pages",
			Help:    "tools/list pages read by a discovery run.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8), // 1 … 16384
		}),
		tools: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "scan_tools",
			Help:    "Tools read by a discovery run.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10), // 1 … 262144
		}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "pointer_moves_total",
			Help: "Active-pointer changes committed, by move (ACTIVATE, REFRESH, ROLLBACK, CLOSE).",
		}, []string{"move"}),
		guard: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "guard_actions_total",
			Help: "Automatic pointer moves the rollout guard attempted, by rule (MISSING_TOOL_RATE, UNAUTHORIZED_EVENT) and outcome (ROLLBACK, CLOSE, FAILED).",
		}, []string{"rule", "outcome"}),
	}
	reg.MustRegister(m.runs, m.scanDuration, m.pages, m.tools, m.moves, m.guard)
	return m
}

// RunEnded counts one run's end.
func (m *Metrics) RunEnded(state catalogv1.DiscoveryState, reason discoveryv1.RunReason, took time.Duration, pages, tools int) {
	if m == nil {
		return
	}
	st := StateLabel(state)
	m.runs.WithLabelValues(st, ReasonLabel(reason)).Inc()
	m.scanDuration.WithLabelValues(st).Observe(took.Seconds())
	m.pages.Observe(float64(pages))
	m.tools.Observe(float64(tools))
}

// PointerMoved counts one committed pointer change.
func (m *Metrics) PointerMoved(move catalogv1.PointerMove) {
	if m == nil {
		return
	}
	m.moves.WithLabelValues(MoveLabel(move)).Inc()
}

// StateLabel is the label value of a state: its name without the enum
// prefix, e.g. `ELIGIBLE`.
func StateLabel(s catalogv1.DiscoveryState) string {
	return strings.TrimPrefix(s.String(), "DISCOVERY_STATE_")
}

// ReasonLabel is the label value of a reason, e.g. `TRANSPORT_ERROR`;
// `NONE` when there was no fault.
func ReasonLabel(r discoveryv1.RunReason) string {
	if r == discoveryv1.RunReason_RUN_REASON_UNSPECIFIED {
		return "NONE"
	}
	return strings.TrimPrefix(r.String(), "RUN_REASON_")
}

// MoveLabel is the label value of a pointer move, e.g. `ACTIVATE`.
func MoveLabel(m catalogv1.PointerMove) string {
	return strings.TrimPrefix(m.String(), "POINTER_MOVE_")
}

// QueueCounter counts the jobs of the scan queue by River state
// (available, running, retryable, scheduled, pending).
type QueueCounter func(ctx context.Context) (map[string]int64, error)

// RegisterQueueDepth registers a gauge, toolcrib_discovery_queue_jobs{state},
// read from count at each scrape (bounded by a 2 s timeout; a failed read
// exports no sample for that scrape).
func RegisterQueueDepth(reg prometheus.Registerer, count QueueCounter) {
	reg.MustRegister(&queueDepth{count: count, desc: prometheus.NewDesc(Namespace+"_queue_jobs",
		"Scan jobs in discovery's queue (River) by state: available, running, retryable, scheduled, pending.",
		[]string{"state"}, nil)})
}

type queueDepth struct {
	count QueueCounter
	desc  *prometheus.Desc
}

func (q *queueDepth) Describe(ch chan<- *prometheus.Desc) { ch <- q.desc }

func (q *queueDepth) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := q.count(ctx)
	if err != nil {
		// Postgres down or not migrated yet: no sample this scrape, rather
		// than failing the whole scrape (the health status says why).
		return
	}
	for _, st := range QueueStates {
		ch <- prometheus.MustNewConstMetric(q.desc, prometheus.GaugeValue, float64(counts[st]), st)
	}
}

// QueueStates are the River job states the queue gauge reports: the jobs
// that still have work ahead of them.
var QueueStates = []string{"available", "pending", "retryable", "running", "scheduled"}

// GuardAction counts one automatic move of the rollout guard: outcome is
// ROLLBACK, CLOSE or FAILED.
func (m *Metrics) GuardAction(rule discoveryv1.GuardRule, outcome string) {
	if m == nil {
		return
	}
	m.guard.WithLabelValues(strings.TrimPrefix(rule.String(), "GUARD_RULE_"), outcome).Inc()
}
