package standing

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolcrib/toolcrib/platform/backoff"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/internal/store"
)

// Channel is the NOTIFY channel of revocation and freeze changes.
const Channel = "lease_changes"

// keep is how far back revocations are loaded: one can refuse only a lease
// issued at or before it takes effect, and no lease lives longer than
// lease.MaxTTL past its issue (plus the skew allowance, at most
// lease.MaxSkew); the rest is a margin for clock differences between the
// replicas and Postgres.
const keep = 5 * time.Minute

// Defaults of [Options].
const (
	DefaultWindow = time.Second
	DefaultReload = 250 * time.Millisecond
)

// Options configure a [View].
type Options struct {
	// Pool reads the tables (search_path = lease); its connection config
	// opens the LISTEN connection.
	Pool *pgxpool.Pool
	// Store answers [View.Status] while the view is stale.
	Store *store.Store
	// Window is how old the newest load may be for the view to answer;
	// 0 means [DefaultWindow].
	Window time.Duration
	// Reload is the period of reloads without a NOTIFY; 0 means
	// [DefaultReload]. Keep it well under Window.
	Reload time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger gets the LISTEN connection's failures.
	Logger *slog.Logger
}

type target struct{ kind, id string }

// View is the in-memory standing of leases: revocations and frozen servers.
type View struct {
	o Options

	kick chan struct{}

	mu      sync.RWMutex
	revoked map[target]time.Time // newest effective_at per target
	frozen  map[string]bool
	loaded  time.Time // when the newest successful load started
	// seen holds what reads of Postgres made while the view was stale
	// found (a freeze, a revoked lease) and the memory may not hold yet,
	// each with when its read ended: a load that started before that may
	// hold older rows than the read, so each load keeps the ones newer
	// than its start. An answer never goes back: once a replica said
	// frozen or revoked, it keeps saying so until a newer load says
	// otherwise (an operator's unfreeze).
	seen []sighting
}

// sighting is one refusal a read of Postgres found.
type sighting struct {
	at     time.Time
	server string // frozen, when not ""
	lease  string // revoked at issuedAt, when not ""
	issued time.Time
}

// New returns a view with nothing loaded (stale until [View.Run] or
// [View.Sync] loads it).
func New(o Options) *View {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Reload <= 0 {
		o.Reload = DefaultReload
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &View{o: o, kick: make(chan struct{}, 1), revoked: map[target]time.Time{}, frozen: map[string]bool{}}
}

// Status is store.Status from memory while the view is fresh, else from
// Postgres.
func (v *View) Status(ctx context.Context, c lease.Claims) (store.Status, error) {
	v.mu.RLock()
	fresh := !v.loaded.IsZero() && v.o.Now().Sub(v.loaded) <= v.o.Window
	var st store.Status
	if fresh {
		for _, t := range [...]target{{store.KindLease, c.ID}, {store.KindTool, c.Tool}, {store.KindServer, c.Server}, {store.KindTenant, c.Tenant}} {
			if t.id == "" {
				continue
			}
			if at, ok := v.revoked[t]; ok && !at.Before(c.IssuedAt) {
				st.Revoked = true
			}
		}
		st.Frozen = v.frozen[c.Server]
	}
	v.mu.RUnlock()
	if fresh {
		return st, nil
	}
	st, err := v.o.Store.Status(ctx, c)
	if err != nil || (!st.Frozen && !st.Revoked) {
		return st, err
	}
	v.saw(c, st)
	return st, nil
}

// SawFrozen records that a read of Postgres other than the view's own (an
// issue's transaction) found server frozen: the view says so from now on,
// until a load that started later.
func (v *View) SawFrozen(server string) {
	v.saw(lease.Claims{Server: server}, store.Status{Frozen: true})
}

func (v *View) saw(c lease.Claims, st store.Status) {
	v.mu.Lock()
	s := sighting{at: v.o.Now()}
	if st.Frozen {
		s.server = c.Server
		v.frozen[c.Server] = true
	}
	if st.Revoked && c.ID != "" {
		s.lease, s.issued = c.ID, c.IssuedAt
		v.revoked[target{store.KindLease, c.ID}] = c.IssuedAt
	}
	v.seen = append(v.seen, s)
	v.mu.Unlock()
}

// Sync loads the view now (after this replica's own Revoke or
// FreezeIssuance committed). When the load fails the view turns stale, so
// nothing is answered from memory that might miss the change.
func (v *View) Sync(ctx context.Context) error {
	if err := v.load(ctx); err != nil {
		v.mu.Lock()
		v.loaded = time.Time{}
		v.mu.Unlock()
		return err
	}
	return nil
}

func (v *View) load(ctx context.Context) error {
	start := v.o.Now()
	revoked := map[target]time.Time{}
	frozen := map[string]bool{}
	b := &pgx.Batch{}
	b.Queue(`SELECT kind, target, max(effective_at) FROM revocations
WHERE effective_at > now() - $1::interval GROUP BY kind, target`, keep.String()).Query(func(rows pgx.Rows) error {
		var t target
		var at time.Time
		_, err := pgx.ForEachRow(rows, []any{&t.kind, &t.id, &at}, func() error {
			revoked[t] = at
			return nil
		})
		return err
	})
	b.Queue(`SELECT server_id FROM freezes WHERE frozen`).Query(func(rows pgx.Rows) error {
		var s string
		_, err := pgx.ForEachRow(rows, []any{&s}, func() error {
			frozen[s] = true
			return nil
		})
		return err
	})
	if err := v.o.Pool.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if start.After(v.loaded) {
		kept := v.seen[:0]
		for _, s := range v.seen {
			if !s.at.After(start) {
				continue // the load's rows are newer than the read's
			}
			kept = append(kept, s)
			if s.server != "" {
				frozen[s.server] = true
			}
			if s.lease != "" {
				k := target{store.KindLease, s.lease}
				if at, ok := revoked[k]; !ok || s.issued.After(at) {
					revoked[k] = s.issued
				}
			}
		}
		v.revoked, v.frozen, v.loaded, v.seen = revoked, frozen, start, kept
	}
	return nil
}

// Run keeps the view loaded until ctx ends: a reload every Options.Reload
// and on every NOTIFY on [Channel]. It returns nil when ctx ends.
func (v *View) Run(ctx context.Context) error {
	go v.listen(ctx)
	t := time.NewTicker(v.o.Reload)
	defer t.Stop()
	failing := false // logged once per change, not per reload (the tables may not exist until migrated)
	for {
		switch err := v.load(ctx); {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			v.o.Logger.WarnContext(ctx, "revocations and freezes not reloaded; Verify reads Postgres once the view is stale", "error", err)
		case err == nil && failing:
			failing = false
			v.o.Logger.InfoContext(ctx, "revocations and freezes reloaded again")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-v.kick:
		}
	}
}

// listen holds a LISTEN connection and kicks a reload per notification,
// reconnecting with backoff; the periodic reload covers the time it is
// down.
func (v *View) listen(ctx context.Context) {
	retry := backoff.New(100*time.Millisecond, 5*time.Second)
	for ctx.Err() == nil {
		err := v.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		d := retry.Next()
		v.o.Logger.WarnContext(ctx, "lease change listener lost; reconnecting", "error", err, "retry_in", d)
		if !backoff.Wait(ctx, d) {
			return
		}
	}
}

func (v *View) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, v.o.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{Channel}.Sanitize()); err != nil {
		return err
	}
	v.poke() // anything committed before LISTEN took effect
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		v.poke()
	}
}

func (v *View) poke() {
	select {
	case v.kick <- struct{}{}:
	default:
	}
}
