package discovery

import (
	"log/slog"

	"github.com/toolcrib/toolcrib/services/discovery/internal/metrics"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// observer logs and counts what discovery's store committed: one log line
// per run end and per pointer move, and the matching metrics. It names
// servers and classes by their registered ids and never logs a run's
// detail (text from the server).
type observer struct {
	lg *slog.Logger
	m  *metrics.Metrics
}

// RunEnded implements [store.Observer].
func (o observer) RunEnded(r store.EndedRun) {
	o.m.RunEnded(r.State, r.Reason, r.Took, r.Pages, r.Tools)
	o.lg.Info("run ended", "server", r.ServerID, "audience_class", r.AudienceClass,
		"state", metrics.StateLabel(r.State), "reason", metrics.ReasonLabel(r.Reason),
		"pages", r.Pages, "tools", r.Tools, "duration", r.Took, "generation", r.Generation, "run", r.RunID)
}

// PointerMoved implements [store.Observer].
func (o observer) PointerMoved(c *store.Committed) {
	p, r := c.Pointer, c.Receipt
	o.m.PointerMoved(r.GetMove())
	o.lg.Info("pointer moved", "server", p.GetServerId(), "audience_class", p.GetAudienceClass(),
		"move", metrics.MoveLabel(r.GetMove()), "generation", p.GetGeneration(), "previous_generation", r.GetPreviousGeneration(),
		"pointer_state", p.GetState().String(), "revision", p.GetRevision(), "run", r.GetRunId())
}
