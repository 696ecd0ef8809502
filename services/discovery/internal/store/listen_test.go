package store_test

import (
	"context"
	"testing"
	"time"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// TestNotificationHistoryCountsFruitlessRuns: the rate limit's input. Only
// LIST_CHANGED and LISTEN_RESUMED runs of the pair count; the newest
// finished ones that made no generation (UNCHANGED, or INCOMPLETE
// LIST_CHANGED) form the streak, a run still going is skipped, and a run
// that made a generation (or ended any other way) ends the streak. The
// suppression fields of a run are recorded and read back.
func TestNotificationHistoryCountsFruitlessRuns(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const srv, aud = "inv", "tenant-a.readers"
	start := func(trigger discoveryv1.ScanTrigger) string {
		t.Helper()
		id, err := f.st.StartRun(ctx, store.NewRun{ScanID: "1", Attempt: 1, ServerID: srv, AudienceClass: aud, Trigger: trigger,
			Worker: "test:1", SuppressedNotifications: 3, NotificationDelay: 1500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct started_at
		return id
	}
	finish := func(id string, state catalogv1.DiscoveryState, reason discoveryv1.RunReason, gen int64) {
		t.Helper()
		if err := f.st.FinishRun(ctx, id, store.RunEnd{State: state, Reason: reason, Generation: gen}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := f.st.NotificationHistory(ctx, srv, aud, 16)
	if err != nil || !h.LastStarted.IsZero() || h.Fruitless != 0 {
		t.Fatalf("empty history: %+v %v", h, err)
	}
	const (
		incomplete = catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE
		proven     = catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN
		changed    = discoveryv1.ScanTrigger_SCAN_TRIGGER_LIST_CHANGED
	)
	finish(start(changed), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED, 2) // made a generation: ends the streak
	finish(start(changed), proven, discoveryv1.RunReason_RUN_REASON_UNCHANGED, 0)
	finish(start(discoveryv1.ScanTrigger_SCAN_TRIGGER_MANUAL), proven, discoveryv1.RunReason_RUN_REASON_UNCHANGED, 0) // not counted
	finish(start(changed), incomplete, discoveryv1.RunReason_RUN_REASON_LIST_CHANGED, 0)
	finish(start(discoveryv1.ScanTrigger_SCAN_TRIGGER_LISTEN_RESUMED), proven, discoveryv1.RunReason_RUN_REASON_UNCHANGED, 0)
	running := start(changed)
	h, err = f.st.NotificationHistory(ctx, srv, aud, 16)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.st.GetRun(ctx, running, false)
	if err != nil {
		t.Fatal(err)
	}
	if h.Fruitless != 3 || !h.LastStarted.Equal(r.GetStartedAt().AsTime()) {
		t.Fatalf("history %+v, want 3 fruitless, last started at the running run's start %v", h, r.GetStartedAt().AsTime())
	}
	if r.GetSuppressedNotifications() != 3 || r.GetNotificationDelayMs() != 1500 {
		t.Fatalf("suppression fields %d %d, want 3 and 1500", r.GetSuppressedNotifications(), r.GetNotificationDelayMs())
	}
	// A transport error ends the streak too: only "nothing new" doubles.
	finish(running, incomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR, 0)
	if h, _ = f.st.NotificationHistory(ctx, srv, aud, 16); h.Fruitless != 0 {
		t.Fatalf("after a transport error: %+v, want 0 fruitless", h)
	}
}

// TestListeningPairs: SetListening adds (idempotently) and removes pairs.
func TestListeningPairs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, p := range [][2]string{{"b", "c1"}, {"a", "c1"}, {"a", "c1"}} {
		if err := f.st.SetListening(ctx, p[0], p[1], true); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.st.SetListening(ctx, "b", "c1", false); err != nil {
		t.Fatal(err)
	}
	pairs, err := f.st.ListeningPairs(ctx)
	if err != nil || len(pairs) != 1 || pairs[0] != [2]string{"a", "c1"} {
		t.Fatalf("pairs %v %v", pairs, err)
	}
}
