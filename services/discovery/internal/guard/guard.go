package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery/internal/metrics"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// Summary is admission's count of one generation's Checks since a time.
type Summary struct {
	// Checks is every stored receipt counted.
	Checks int64
	// Denied is, per tool id, its NOT_FOUND plus STALE_CATALOG receipts.
	Denied map[string]int64
}

// Admission counts receipts.
//
// Summarize returns the counts of (server, class, generation) decided at
// or after since, from admission's stored receipts. Any error means the
// rate is not known for this pass; the guard then does not act on it.
type Admission interface {
	Summarize(ctx context.Context, server, class string, generation int64, since time.Time) (Summary, error)
}

// AdmissionClient is [Admission] over AdmissionService.SummarizeDecisions;
// the connection carries the service token.
type AdmissionClient struct {
	Client admissionv1.AdmissionServiceClient
}

// Summarize implements [Admission].
func (a AdmissionClient) Summarize(ctx context.Context, server, class string, generation int64, since time.Time) (Summary, error) {
	resp, err := a.Client.SummarizeDecisions(ctx, &admissionv1.SummarizeDecisionsRequest{
		ServerId: server, AudienceClass: class, Generation: generation, Since: timestamppb.New(since)})
	if err != nil {
		return Summary{}, fmt.Errorf("admission SummarizeDecisions: %s", status.Code(err))
	}
	s := Summary{Checks: resp.GetChecks(), Denied: make(map[string]int64, len(resp.GetTools()))}
	for _, t := range resp.GetTools() {
		s.Denied[t.GetToolId()] += t.GetNotFound() + t.GetStaleCatalog()
	}
	return s, nil
}

// Config tunes the guard.
type Config struct {
	// Window is how far back the missing-tool rate looks (it never looks
	// before the generation became active or the pair was resumed).
	Window time.Duration
	// MissingRate is the threshold: the guard acts when missing / checks
	// is above it.
	MissingRate float64
	// MinChecks is the fewest Checks in the window before the rate counts.
	MinChecks int64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Guard is the rollout guard.
type Guard struct {
	st  *store.Store
	adm Admission
	cfg Config
	lg  *slog.Logger
	m   *metrics.Metrics
}

// New returns a guard; adm nil disables the missing-tool rule (incidents
// still act).
func New(st *store.Store, adm Admission, cfg Config, lg *slog.Logger, m *metrics.Metrics) *Guard {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Guard{st: st, adm: adm, cfg: cfg, lg: lg, m: m}
}

// maxMissingTools bounds the tool ids kept as evidence of one action.
const maxMissingTools = 20

// Pass looks at every active pointer once and acts where a rule fires. A
// failure on one pair is logged and counted, and the others still run;
// the error is the first store failure to list the pairs.
func (g *Guard) Pass(ctx context.Context) error {
	pairs, err := g.st.GuardPairs(ctx)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		if ctx.Err() != nil {
			return nil
		}
		if p.Held {
			if len(p.Incidents) > 0 {
				if _, err := g.st.AttachIncidents(ctx, p.ServerID, p.AudienceClass); err != nil {
					g.lg.WarnContext(ctx, "rollout guard: attaching incidents to a held pair failed", "server_id", p.ServerID,
						"audience_class", p.AudienceClass, "error", err)
				}
			}
			continue
		}
		if len(p.Incidents) > 0 {
			g.move(ctx, store.GuardMove{ServerID: p.ServerID, AudienceClass: p.AudienceClass, Expected: p.Generation,
				Rule: discoveryv1.GuardRule_GUARD_RULE_UNAUTHORIZED_EVENT, Incidents: p.Incidents,
				Reason: fmt.Sprintf("rollout guard: %d unauthorized event(s), first %s", len(p.Incidents), p.Incidents[0])})
			continue
		}
		if m, ok := g.missing(ctx, p); ok {
			g.move(ctx, m)
		}
	}
	return nil
}

// missing evaluates the missing-tool rule of p; ok when it fires.
func (g *Guard) missing(ctx context.Context, p store.GuardPair) (store.GuardMove, bool) {
	if g.adm == nil || p.Previous == 0 {
		return store.GuardMove{}, false
	}
	now := g.cfg.Now()
	since := now.Add(-g.cfg.Window)
	if p.ActivatedAt.After(since) {
		since = p.ActivatedAt
	}
	if p.ResumedAt.After(since) {
		since = p.ResumedAt
	}
	sum, err := g.adm.Summarize(ctx, p.ServerID, p.AudienceClass, p.Generation, since)
	if err != nil {
		g.lg.WarnContext(ctx, "rollout guard: the missing-tool rate is not known", "server_id", p.ServerID,
			"audience_class", p.AudienceClass, "error", err)
		return store.GuardMove{}, false
	}
	if sum.Checks < g.cfg.MinChecks || sum.Checks == 0 {
		return store.GuardMove{}, false
	}
	prev, err := g.st.ToolIDs(ctx, p.ServerID, p.AudienceClass, p.Previous)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			g.lg.WarnContext(ctx, "rollout guard: reading the previous generation failed", "server_id", p.ServerID,
				"audience_class", p.AudienceClass, "generation", p.Previous, "error", err)
		}
		return store.GuardMove{}, false
	}
	var missing int64
	var tools []string
	for id, n := range sum.Denied {
		if prev[id] && n > 0 {
			missing += n
			tools = append(tools, id)
		}
	}
	rate := float64(missing) / float64(sum.Checks)
	if rate <= g.cfg.MissingRate {
		return store.GuardMove{}, false
	}
	slices.SortFunc(tools, func(a, b string) int {
		if d := sum.Denied[b] - sum.Denied[a]; d != 0 {
			return int(min(max(d, -1), 1))
		}
		return strings.Compare(a, b)
	})
	if len(tools) > maxMissingTools {
		tools = tools[:maxMissingTools]
	}
	return store.GuardMove{ServerID: p.ServerID, AudienceClass: p.AudienceClass, Expected: p.Generation,
		Rule: discoveryv1.GuardRule_GUARD_RULE_MISSING_TOOL_RATE, Previous: p.Previous, Checks: sum.Checks, Missing: missing,
		Threshold: g.cfg.MissingRate, WindowStart: since, MissingTools: tools,
		Reason: fmt.Sprintf("rollout guard: missing-tool rate %.4f above %.4f (%d of %d Checks since %s; tools of generation %d)",
			rate, g.cfg.MissingRate, missing, sum.Checks, since.UTC().Format(time.RFC3339Nano), p.Previous)}, true
}

func (g *Guard) move(ctx context.Context, m store.GuardMove) {
	c, act, err := g.st.Guard(ctx, m)
	switch {
	case errors.Is(err, store.ErrCASConflict), errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrHeld):
		// The pointer moved, closed or was held meanwhile: the next pass
		// looks again at what it is now.
		return
	case err != nil:
		g.m.GuardAction(m.Rule, "FAILED")
		g.lg.ErrorContext(ctx, "rollout guard: the automatic move failed", "server_id", m.ServerID,
			"audience_class", m.AudienceClass, "rule", m.Rule.String(), "error", err)
		return
	}
	outcome := "ROLLBACK"
	if c.Receipt.GetMove() == catalogv1.PointerMove_POINTER_MOVE_CLOSE {
		outcome = "CLOSE"
	}
	g.m.GuardAction(m.Rule, outcome)
	g.lg.WarnContext(ctx, "rollout guard moved the pointer back", "server_id", m.ServerID, "audience_class", m.AudienceClass,
		"rule", strings.TrimPrefix(m.Rule.String(), "GUARD_RULE_"), "move", outcome, "from_generation", m.Expected,
		"to_generation", c.Pointer.GetGeneration(), "checks", m.Checks, "missing", m.Missing, "threshold", m.Threshold,
		"incidents", len(m.Incidents), "action_id", act.GetActionId(), "receipt_id", c.Receipt.GetReceiptId())
}
