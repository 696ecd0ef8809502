package store_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery/internal/guard"
	"github.com/toolcrib/toolcrib/services/discovery/internal/metrics"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// fakeAdmission answers every Summarize with sum (or err) and records the
// windows asked for.
type fakeAdmission struct {
	sum    guard.Summary
	err    error
	asked  []int64 // generations
	sinces []time.Time
}

func (a *fakeAdmission) Summarize(_ context.Context, _, _ string, gen int64, since time.Time) (guard.Summary, error) {
	a.asked, a.sinces = append(a.asked, gen), append(a.sinces, since)
	return a.sum, a.err
}

// TestGuardMissingToolRule: over generation 2 (which replaced 1, both with
// inv.t0..t2), the rule fires only above the threshold (0.05) with at least
// the minimum Checks (20), counting only tools generation 1 had; it asks
// for the active generation since it became active; when it fires the
// pointer goes back to 1 with one action carrying the figures, and a
// second pass does nothing.
func TestGuardMissingToolRule(t *testing.T) {
	for _, c := range []struct {
		name   string
		sum    guard.Summary
		err    error
		act    bool
		miss   int64
		missed []string
	}{
		{name: "below the minimum Checks", sum: guard.Summary{Checks: 19, Denied: map[string]int64{"inv.t0": 19}}},
		{name: "at the threshold", sum: guard.Summary{Checks: 100, Denied: map[string]int64{"inv.t0": 5}}},
		{name: "a tool generation 1 never had", sum: guard.Summary{Checks: 100, Denied: map[string]int64{"inv.other": 50, "inv.t1": 1}}},
		{name: "admission unavailable", sum: guard.Summary{Checks: 100, Denied: map[string]int64{"inv.t0": 100}}, err: errors.New("down")},
		{name: "above the threshold", sum: guard.Summary{Checks: 100, Denied: map[string]int64{"inv.t1": 2, "inv.t0": 4, "inv.other": 9}},
			act: true, miss: 6, missed: []string{"inv.t0", "inv.t1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if _, err := f.commit(t, "inv", "a.b", "r1", store.Expected{}, time.Hour); err != nil {
				t.Fatal(err)
			}
			two, err := f.commit(t, "inv", "a.b", "r2", f.view(t, "inv", "a.b"), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			adm := &fakeAdmission{sum: c.sum, err: c.err}
			g := guard.New(f.st, adm, guard.Config{Window: time.Hour, MissingRate: 0.05, MinChecks: 20}, slog.New(slog.DiscardHandler),
				metrics.New(prometheus.NewRegistry()))
			for range 2 {
				if err := g.Pass(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if len(adm.asked) == 0 || adm.asked[0] != 2 || !adm.sinces[0].Equal(two.Receipt.GetAcceptedAt().AsTime()) {
				t.Fatalf("asked for generations %v since %v; activated at %v", adm.asked, adm.sinces, two.Receipt.GetAcceptedAt().AsTime())
			}
			acts, _, err := f.st.ListGuardActions(ctx, store.GuardFilter{}, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			ptr, err := f.st.ActivePointer(ctx, "inv", "a.b")
			if err != nil {
				t.Fatal(err)
			}
			if !c.act {
				if len(acts) != 0 || ptr.GetGeneration() != 2 {
					t.Fatalf("acted: %v, pointer %v", acts, ptr)
				}
				return
			}
			if len(acts) != 1 || ptr.GetGeneration() != 1 || len(adm.asked) != 1 {
				t.Fatalf("actions %v, pointer %v, asked %v", acts, ptr, adm.asked)
			}
			a := acts[0]
			if a.GetRule() != discoveryv1.GuardRule_GUARD_RULE_MISSING_TOOL_RATE || a.GetMove() != catalogv1.PointerMove_POINTER_MOVE_ROLLBACK ||
				a.GetFromGeneration() != 2 || a.GetToGeneration() != 1 || a.GetPreviousGeneration() != 1 || a.GetChecks() != 100 ||
				a.GetMissing() != c.miss || !slices.Equal(a.GetMissingTools(), c.missed) || a.GetThreshold() != 0.05 ||
				a.GetReceiptId() != ptrReceipt(t, f, "inv", "a.b") {
				t.Fatalf("action %v", a)
			}
		})
	}
}

func ptrReceipt(t *testing.T, f *fixture, server, aud string) string {
	t.Helper()
	var id string
	if err := f.pool.QueryRow(context.Background(), `SELECT receipt_id::text FROM receipts WHERE server_id = $1 AND audience_class = $2
ORDER BY accepted_at DESC LIMIT 1`, server, aud).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestGuardIncidents: one incident rolls back (or, with nothing older
// fresh, closes); incidents reported while the pair is held attach to the
// holding action and never act after the resume; a report is stored once
// per event id.
func TestGuardIncidents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.commit(t, "inv", "a.b", "r1", store.Expected{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := f.commit(t, "inv", "a.b", "r2", f.view(t, "inv", "a.b"), time.Hour); err != nil {
		t.Fatal(err)
	}
	g := guard.New(f.st, nil, guard.Config{Window: time.Hour, MissingRate: 0.05, MinChecks: 20}, slog.New(slog.DiscardHandler),
		metrics.New(prometheus.NewRegistry()))
	report := func(id string) bool {
		t.Helper()
		_, dup, err := f.st.ReportIncident(ctx, &discoveryv1.Incident{EventId: id, Kind: discoveryv1.IncidentKind_INCIDENT_KIND_LEASE_AFTER_REVOKE,
			ServerId: "inv", AudienceClass: "a.b", Generation: 2, ObservedAt: nil, ReportedBy: "svc"})
		if err != nil {
			t.Fatal(err)
		}
		return dup
	}
	pass := func() {
		t.Helper()
		if err := g.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if report("e1") || !report("e1") {
		t.Fatal("the first report of e1 was a duplicate, or the second was not")
	}
	pass()
	pass()
	ptr, _ := f.st.ActivePointer(ctx, "inv", "a.b")
	acts, _, _ := f.st.ListGuardActions(ctx, store.GuardFilter{}, 0, 10)
	if ptr.GetGeneration() != 1 || len(acts) != 1 || !slices.Equal(acts[0].GetIncidentIds(), []string{"e1"}) ||
		acts[0].GetRule() != discoveryv1.GuardRule_GUARD_RULE_UNAUTHORIZED_EVENT {
		t.Fatalf("after e1: pointer %v, actions %v", ptr, acts)
	}
	report("e2") // while held
	pass()
	acts, _, _ = f.st.ListGuardActions(ctx, store.GuardFilter{HeldOnly: true}, 0, 10)
	if len(acts) != 1 || !slices.Equal(acts[0].GetIncidentIds(), []string{"e1", "e2"}) {
		t.Fatalf("after e2 while held: %v", acts)
	}
	if got, err := f.st.ResumeGuard(ctx, "inv", "a.b", "admin", "ok"); err != nil || len(got) != 1 {
		t.Fatalf("resume: %v %v", got, err)
	}
	pass()
	if ptr, _ := f.st.ActivePointer(ctx, "inv", "a.b"); ptr.GetGeneration() != 1 {
		t.Fatalf("moved after the resume on old evidence: %v", ptr)
	}
	// A new incident after the resume acts again; nothing older than 1 is
	// fresh (there is nothing older), so the pointer closes.
	report("e3")
	pass()
	ptr, _ = f.st.ActivePointer(ctx, "inv", "a.b")
	acts, _, _ = f.st.ListGuardActions(ctx, store.GuardFilter{}, 0, 10)
	if ptr.GetState() != discoveryv1.PointerState_POINTER_STATE_CLOSED || len(acts) != 2 || acts[0].GetMove() != catalogv1.PointerMove_POINTER_MOVE_CLOSE ||
		!slices.Equal(acts[0].GetIncidentIds(), []string{"e3"}) || acts[0].GetFromGeneration() != 1 {
		t.Fatalf("after e3: pointer %v, actions %v", ptr, acts)
	}
}
