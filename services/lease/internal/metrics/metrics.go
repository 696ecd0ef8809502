// Package metrics is the lease service's Prometheus metrics (issue 11
// point 7): leases issued, verifications by failure, replays refused,
// frozen servers and the age of the signing key.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolcrib/toolcrib/revision/lease"
)

// ResultValid is the `result` label of an accepted verification.
const ResultValid = "valid"

// Metrics are the lease service's collectors.
type Metrics struct {
	issued   prometheus.Counter
	verified *prometheus.CounterVec
	redeemed *prometheus.CounterVec
	replays  prometheus.Counter
	frozen   prometheus.Counter
	incident prometheus.Counter
}

// Sources are what the gauges read at scrape time.
type Sources struct {
	// FrozenCount is the number of servers whose issuance is frozen.
	FrozenCount func(ctx context.Context) (int, error)
	// KeyAge is the age of the current signing key.
	KeyAge func() time.Duration
}

// New registers the collectors on reg.
func New(reg prometheus.Registerer, src Sources) *Metrics {
	m := &Metrics{
		issued: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolcrib_lease_issued_total",
			Help: "Leases issued (execution receipt committed, token returned)."}),
		verified: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolcrib_lease_verifications_total",
			Help: "Verify answers by result: valid, or the one VerifyFailure (e.g. ALREADY_USED)."}, []string{"result"}),
		redeemed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolcrib_lease_redemptions_total",
			Help: "Redeem answers by result: valid, or the one VerifyFailure (e.g. ALREADY_USED)."}, []string{"result"}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolcrib_lease_replays_refused_total",
			Help: "Verify and Redeem calls refused because the lease was already used (single use)."}),
		frozen: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolcrib_lease_auto_freezes_total",
			Help: "Servers frozen automatically on a discovery ROLLBACK or CLOSE move."}),
		incident: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolcrib_lease_incidents_total",
			Help: "Leases presented at Verify that were issued after a revocation of their subject's grant had committed (reported to discovery's rollout guard)."}),
	}
	reg.MustRegister(m.issued, m.verified, m.redeemed, m.replays, m.frozen, m.incident)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "toolcrib_lease_frozen_servers",
		Help: "Servers whose lease issuance is frozen now (-1 when the database cannot be read)."}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := src.FrozenCount(ctx)
		if err != nil {
			return -1
		}
		return float64(n)
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "toolcrib_lease_signing_key_age_seconds",
		Help: "Age of the signing key new leases are signed with."}, func() float64 { return src.KeyAge().Seconds() }))
	// Every result is exported from the start, at 0.
	for _, v := range []*prometheus.CounterVec{m.verified, m.redeemed} {
		v.WithLabelValues(ResultValid)
		for _, f := range lease.Failures() {
			v.WithLabelValues(f.String())
		}
	}
	return m
}

// Issued counts one lease issued.
func (m *Metrics) Issued() { m.issued.Inc() }

// Verified counts one Verify answer; f is 0 for an accepted lease.
func (m *Metrics) Verified(f lease.Failure) { m.count(m.verified, f) }

// Redeemed counts one Redeem answer; f is 0 for an accepted lease.
func (m *Metrics) Redeemed(f lease.Failure) { m.count(m.redeemed, f) }

func (m *Metrics) count(v *prometheus.CounterVec, f lease.Failure) {
	if f == 0 {
		v.WithLabelValues(ResultValid).Inc()
		return
	}
	v.WithLabelValues(f.String()).Inc()
	if f == lease.AlreadyUsed {
		m.replays.Inc()
	}
}

// AutoFrozen counts one automatic freeze.
func (m *Metrics) AutoFrozen() { m.frozen.Inc() }

// Incident counts one lease found issued after its grant was revoked.
func (m *Metrics) Incident() { m.incident.Inc() }
