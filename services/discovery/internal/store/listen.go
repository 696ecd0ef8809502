package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SetListening records whether (server, audience class) gets a listening
// connection: true after a committed scan of a server that declared
// `tools.listChanged`, false when it did not (or the pair is gone).
func (s *Store) SetListening(ctx context.Context, serverID, audienceClass string, listen bool) error {
	var err error
	if listen {
		_, err = s.pool.Exec(ctx, `INSERT INTO listen_pairs (server_id, audience_class) VALUES ($1, $2)
ON CONFLICT (server_id, audience_class) DO UPDATE SET updated_at = now()`, serverID, audienceClass)
	} else {
		_, err = s.pool.Exec(ctx, `DELETE FROM listen_pairs WHERE server_id = $1 AND audience_class = $2`, serverID, audienceClass)
	}
	if err != nil {
		return fmt.Errorf("store: set listening: %w", err)
	}
	return nil
}

// ListeningPairs returns every pair that gets a listening connection, as
// [server, audience class].
func (s *Store) ListeningPairs(ctx context.Context) ([][2]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT server_id, audience_class FROM listen_pairs ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("store: listening pairs: %w", err)
	}
	pairs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var p [2]string
		err := r.Scan(&p[0], &p[1])
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: listening pairs: %w", err)
	}
	return pairs, nil
}

// NotificationHistory is what the rate limit of notification-triggered
// scans of one pair decides from.
type NotificationHistory struct {
	// LastStarted is when the newest notification-triggered run started;
	// zero when there is none.
	LastStarted time.Time
	// Fruitless counts the newest of those runs, newest
	// first, that finished without a new generation (UNCHANGED, or
	// INCOMPLETE because yet another list_changed arrived) until the first
	// one that made a generation or ended otherwise; at most limit.
	Fruitless int
}

// NotificationHistory reads the newest runs of a pair triggered by a
// notification or a resumed listener (at most limit of them).
func (s *Store) NotificationHistory(ctx context.Context, serverID, audienceClass string, limit int) (NotificationHistory, error) {
	rows, err := s.pool.Query(ctx, `SELECT started_at, finished_at IS NULL, generation = 0 AND reason IN ('UNCHANGED', 'LIST_CHANGED')
FROM runs WHERE server_id = $1 AND audience_class = $2 AND trigger IN ('LIST_CHANGED', 'LISTEN_RESUMED')
ORDER BY started_at DESC LIMIT $3`, serverID, audienceClass, limit)
	if err != nil {
		return NotificationHistory{}, fmt.Errorf("store: notification history: %w", err)
	}
	type run struct {
		started            time.Time
		running, fruitless bool
	}
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (run, error) {
		var x run
		err := r.Scan(&x.started, &x.running, &x.fruitless)
		return x, err
	})
	if err != nil {
		return NotificationHistory{}, fmt.Errorf("store: notification history: %w", err)
	}
	var h NotificationHistory
	for i, r := range runs {
		if i == 0 {
			h.LastStarted = r.started
		}
		if r.running {
			continue // neither: the streak is what ended
		}
		if !r.fruitless {
			break
		}
		h.Fruitless++
	}
	return h, nil
}
