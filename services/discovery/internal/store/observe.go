package store

import (
	"time"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

// Observer hears what the store committed: every run's end and every
// pointer move, each once, after its transaction committed (never for a
// transaction that rolled back). It is how discovery logs and counts them
// without every writer having to remember to.
type Observer interface {
	// RunEnded is called when a run's end was recorded, including runs
	// ended INCOMPLETE WORKER_LOST on behalf of a dead worker.
	RunEnded(EndedRun)
	// PointerMoved is called when a pointer change was appended to the
	// change log (ACTIVATE, REFRESH, ROLLBACK or CLOSE).
	PointerMoved(*Committed)
}

// EndedRun is what an [Observer] hears of a run's end.
type EndedRun struct {
	RunID         string
	ServerID      string
	AudienceClass string
	State         catalogv1.DiscoveryState
	Reason        discoveryv1.RunReason
	Pages         int
	Tools         int
	// Generation is the generation the run committed, or, for an UNCHANGED
	// run, the one it confirmed; 0 when none.
	Generation int64
	// Took is the run's duration from its start to its recorded end.
	Took time.Duration
}

// WithObserver makes the store report to o and returns the store.
func (s *Store) WithObserver(o Observer) *Store {
	s.obs = o
	return s
}

// ended reports run ends after their transaction committed.
func (s *Store) ended(runs ...*EndedRun) {
	if s.obs == nil {
		return
	}
	for _, r := range runs {
		if r != nil {
			s.obs.RunEnded(*r)
		}
	}
}

// moved reports a pointer move after its transaction committed.
func (s *Store) moved(c *Committed) {
	if s.obs != nil && c != nil {
		s.obs.PointerMoved(c)
	}
}

// lostRuns turns the rows (run_id, server_id, audience_class, page_count,
// tool_count, seconds) of runs just marked WORKER_LOST into ended runs.
func lostRun(id, server, aud string, pages, tools int, secs float64) *EndedRun {
	return &EndedRun{RunID: id, ServerID: server, AudienceClass: aud,
		State: catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE, Reason: discoveryv1.RunReason_RUN_REASON_WORKER_LOST,
		Pages: pages, Tools: tools, Took: time.Duration(secs * float64(time.Second))}
}
