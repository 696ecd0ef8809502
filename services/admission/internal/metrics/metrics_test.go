package metrics

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/services/admission/internal/receipts"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
)

// TestFreshnessLogsEachStateChangeOnce walks a replica through never caught
// up, caught up, stale (discovery's heartbeat too old) and resynced, polling
// several times in each state: exactly one line per change, in order.
func TestFreshnessLogsEachStateChangeOnce(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	heads := replica.NewHeads(5*time.Second, clock)
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	var f freshLog
	poll := func() {
		for range 3 {
			f.observe(heads, logger, now)
		}
	}
	poll() // neither stream ever caught up: nothing to report yet
	heads.Heartbeat(changelog.RegistryHead)
	poll()
	heads.Heartbeat(changelog.DiscoveryHead)
	poll()
	now = now.Add(4 * time.Second)
	heads.Heartbeat(changelog.RegistryHead)
	poll()
	now = now.Add(2 * time.Second) // discovery's newest heartbeat is 6 s old
	poll()
	now = now.Add(1500 * time.Millisecond)
	heads.Heartbeat(changelog.RegistryHead)
	heads.Heartbeat(changelog.DiscoveryHead)
	poll()

	want := []string{
		`level=INFO msg="replica caught up"`,
		`level=WARN msg="replica stale" why="discovery Watch sent no heartbeat within the validity window"`,
		`level=INFO msg="replica resynced" stale_for=1.5s`,
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(got) != len(want) {
		t.Fatalf("log:\n%s", buf.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, got[i], want[i])
		}
	}
}

// TestHeartbeatAge reads the gauges through a registry: +Inf before a
// stream's first heartbeat, then its age on the given clock.
func TestHeartbeatAge(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	heads := replica.NewHeads(5*time.Second, func() time.Time { return now })
	heads.Heartbeat(changelog.RegistryHead)
	now = now.Add(2500 * time.Millisecond)
	reg := prometheusRegistry()
	m := New(reg, Sources{Heads: heads, Pending: func() int { return 7 }, Now: func() time.Time { return now },
		ReceiptLookups: func(a receipts.Answer) int64 { return 10 + int64(a) }})
	m.Decided(0, 0)
	var nilM *Metrics
	nilM.Decided(0, 0) // a nil Metrics is a no-op
	out := gather(t, reg)
	for _, want := range []string{
		`toolcrib_admission_heartbeat_age_seconds{stream="registry"} 2.5`,
		`toolcrib_admission_heartbeat_age_seconds{stream="discovery"} +Inf`,
		`toolcrib_admission_receipts_pending 7`,
		`toolcrib_admission_decisions_total{reason="UNSPECIFIED"} 1`,
		`toolcrib_admission_receipt_lookups_total{answer="memory"} 10`,
		`toolcrib_admission_receipt_lookups_total{answer="postgres"} 11`,
		`toolcrib_admission_receipt_lookups_total{answer="after_wait"} 12`,
		`toolcrib_admission_receipt_lookups_total{answer="not_found"} 13`,
	} {
		if !regexp.MustCompile(regexp.QuoteMeta(want) + `\n`).MatchString(out) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
}
