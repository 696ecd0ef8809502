package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolcrib/toolcrib/revision/lease"
)

// TestMetrics: each counter counts what it names, a replay counts both as
// ALREADY_USED and as a replay refused, and the gauges read their sources
// at scrape time (-1 when the frozen count cannot be read).
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	frozen, ferr := 2, error(nil)
	m := New(reg, Sources{
		FrozenCount: func(context.Context) (int, error) { return frozen, ferr },
		KeyAge:      func() time.Duration { return 90 * time.Second },
	})
	m.Issued()
	m.Issued()
	m.Verified(0)
	m.Verified(lease.AlreadyUsed)
	m.Verified(lease.Frozen)
	m.Redeemed(0)
	m.Redeemed(lease.AlreadyUsed)
	m.AutoFrozen()
	want := `
# HELP toolcrib_lease_issued_total Leases issued (execution receipt committed, token returned).
# TYPE toolcrib_lease_issued_total counter
toolcrib_lease_issued_total 2
# HELP toolcrib_lease_replays_refused_total Verify and Redeem calls refused because the lease was already used (single use).
# TYPE toolcrib_lease_replays_refused_total counter
toolcrib_lease_replays_refused_total 2
# HELP toolcrib_lease_auto_freezes_total Servers frozen automatically on a discovery ROLLBACK or CLOSE move.
# TYPE toolcrib_lease_auto_freezes_total counter
toolcrib_lease_auto_freezes_total 1
# HELP toolcrib_lease_frozen_servers Servers whose lease issuance is frozen now (-1 when the database cannot be read).
# TYPE toolcrib_lease_frozen_servers gauge
toolcrib_lease_frozen_servers 2
# HELP toolcrib_lease_signing_key_age_seconds Age of the signing key new leases are signed with.
# TYPE toolcrib_lease_signing_key_age_seconds gauge
toolcrib_lease_signing_key_age_seconds 90
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "toolcrib_lease_issued_total",
		"toolcrib_lease_replays_refused_total", "toolcrib_lease_auto_freezes_total", "toolcrib_lease_frozen_servers",
		"toolcrib_lease_signing_key_age_seconds"); err != nil {
		t.Fatal(err)
	}
	for result, n := range map[string]float64{ResultValid: 1, "ALREADY_USED": 1, "FROZEN": 1, "BAD_SIGNATURE": 0} {
		if got := testutil.ToFloat64(m.verified.WithLabelValues(result)); got != n {
			t.Errorf("verifications{result=%s} = %v, want %v", result, got, n)
		}
	}
	for result, n := range map[string]float64{ResultValid: 1, "ALREADY_USED": 1, "FROZEN": 0} {
		if got := testutil.ToFloat64(m.redeemed.WithLabelValues(result)); got != n {
			t.Errorf("redemptions{result=%s} = %v, want %v", result, got, n)
		}
	}
	ferr = errors.New("database down")
	if got := gaugeValue(t, reg, "toolcrib_lease_frozen_servers"); got != -1 {
		t.Errorf("frozen servers with the database down: %v", got)
	}
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
