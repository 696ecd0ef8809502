// Package metrics are the gateway's Prometheus metrics, registered on the
// service's registry (served at /metrics with the gRPC and Go metrics).
// Labels are bounded enums (outcome, reason); no tool argument or result
// is ever a label or a log field.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the gateway's counters and histograms.
type Metrics struct {
	calls     *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	lists     prometheus.Counter
	changes   prometheus.Counter
	artifacts prometheus.Counter
	artBytes  prometheus.Counter
	swept     prometheus.Counter
}

// New registers the metrics on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolcrib_gateway_tool_calls_total",
			Help: "tools/call answered, by outcome (ok, denied, refused, unavailable, confirm) and reason"}, []string{"outcome", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolcrib_gateway_tool_call_seconds",
			Help:    "time to answer tools/call, by outcome",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}}, []string{"outcome"}),
		lists: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolcrib_gateway_tool_lists_total",
			Help: "tools/list first pages answered (each reads the visible set)"}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolcrib_gateway_visible_set_changes_total",
			Help: "visible-set digest changes seen (each sends tools/list_changed to the principal's listeners)"}),
		artifacts: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolcrib_gateway_artifacts_stored_total",
			Help: "results over the budget stored as artifacts"}),
		artBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolcrib_gateway_artifact_bytes_total",
			Help: "bytes stored as artifacts"}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolcrib_gateway_artifacts_expired_total",
			Help: "expired artifacts deleted"}),
	}
	reg.MustRegister(m.calls, m.duration, m.lists, m.changes, m.artifacts, m.artBytes, m.swept)
	return m
}

// Call records one answered tools/call.
func (m *Metrics) Call(outcome, reason string, took time.Duration) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(outcome, reason).Inc()
	m.duration.WithLabelValues(outcome).Observe(took.Seconds())
}

// List records one first-page tools/list.
func (m *Metrics) List() {
	if m != nil {
		m.lists.Inc()
	}
}

// Changed records a visible-set change.
func (m *Metrics) Changed() {
	if m != nil {
		m.changes.Inc()
	}
}

// Artifact records one stored artifact of size bytes.
func (m *Metrics) Artifact(size int) {
	if m != nil {
		m.artifacts.Inc()
		m.artBytes.Add(float64(size))
	}
}

// Swept records n expired artifacts deleted.
func (m *Metrics) Swept(n int64) {
	if m != nil {
		m.swept.Add(float64(n))
	}
}
