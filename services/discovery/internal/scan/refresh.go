package scan

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
)

// linger keeps a committed scan's session that no listener took open for
// Config.Linger and passes a `notifications/tools/list_changed` that
// arrives after the crawl decided (including before the commit) to the
// notification gate. It takes the session over.
func (s *Scanner) linger(st *scanState, decided int64) {
	sess := st.sess
	st.sess = nil
	if s.cfg.Linger < 0 {
		if sess.ListChangedCount() > decided {
			s.gate.heard([2]string{st.args.ServerID, st.args.AudienceClass}, discoveryv1.ScanTrigger_SCAN_TRIGGER_LIST_CHANGED)
		}
		// Closing (an HTTP DELETE, or a process exit) need not delay the job.
		s.lingering.Go(func() { _ = sess.Close() })
		return
	}
	s.lingering.Add(1)
	go func() {
		defer s.lingering.Done()
		defer sess.Close()
		timer := time.NewTimer(s.cfg.Linger)
		defer timer.Stop()
		for sess.ListChangedCount() == decided {
			select {
			case <-sess.ListChanged():
			case <-timer.C:
				return
			case <-s.stopLinger:
				return
			}
		}
		s.gate.heard([2]string{st.args.ServerID, st.args.AudienceClass}, discoveryv1.ScanTrigger_SCAN_TRIGGER_LIST_CHANGED)
	}()
}

// refreshDue queues a PERIODIC scan of every (server, class) pair whose last
// run started longer ago than the server's scan interval.
func (s *Scanner) refreshDue(ctx context.Context) error {
	servers, _, err := s.reg.Servers(ctx)
	if err != nil {
		return err
	}
	classes, err := s.reg.AudienceClasses(ctx, "")
	if err != nil {
		return err
	}
	interval := map[string]time.Duration{}
	for _, srv := range servers {
		d := s.cfg.RefreshInterval
		if si := srv.GetScanInterval(); si != nil && si.AsDuration() > 0 {
			d = si.AsDuration()
		}
		interval[srv.GetServerId()] = d
	}
	last := map[[2]string]time.Time{}
	rows, err := s.pool.Query(ctx, `SELECT server_id, audience_class, max(started_at) FROM runs GROUP BY 1, 2`)
	if err != nil {
		return err
	}
	type lastRun struct {
		server, aud string
		at          time.Time
	}
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lastRun, error) {
		var l lastRun
		err := r.Scan(&l.server, &l.aud, &l.at)
		return l, err
	})
	if err != nil {
		return err
	}
	for _, l := range runs {
		last[[2]string{l.server, l.aud}] = l.at
	}
	now := time.Now()
	var due [][2]string
	for _, c := range classes {
		for _, b := range c.GetServers() {
			d, ok := interval[b.GetServerId()]
			if !ok {
				continue // bound to a server that is not registered
			}
			pair := [2]string{b.GetServerId(), c.GetName()}
			if at, ok := last[pair]; !ok || now.Sub(at) >= d {
				due = append(due, pair)
			}
		}
	}
	for chunk := range slices.Chunk(due, 500) {
		if _, err := s.Enqueue(ctx, discoveryv1.ScanTrigger_SCAN_TRIGGER_PERIODIC, chunk...); err != nil {
			return err
		}
	}
	return nil
}

// watchRegistry queues scans for registry changes that can change a scan's
// outcome (see the package doc). It follows the registry's Watch with the
// one [changelog.Follower]: a stream silent past RegistryStallTimeout (no
// change, no heartbeat) is dropped and resumed, a compacted revision
// re-lists, failures back off.
func (s *Scanner) watchRegistry(ctx context.Context) error {
	w := &registryWatch{reg: s.reg, lg: s.lg, enqueue: func(ctx context.Context, pairs [][2]string) error {
		_, err := s.Enqueue(ctx, discoveryv1.ScanTrigger_SCAN_TRIGGER_REGISTRY_CHANGE, pairs...)
		return err
	}}
	return w.follower(s.cfg.RegistryStallTimeout).Run(ctx)
}

// registryWatch turns registry changes into the (server, class) pairs to
// rescan. It keeps every server and every class's bindings, to tell a
// material change from one that cannot change a scan.
type registryWatch struct {
	reg     registryclient.Registry
	lg      *slog.Logger
	enqueue func(ctx context.Context, pairs [][2]string) error

	known   map[string]*registryv1.Server
	classes map[string]map[string]string // class -> server -> secret ref
}

// follower returns the follower of the registry's Watch into w.
func (w *registryWatch) follower(stall time.Duration) *changelog.Follower[*registryv1.Change] {
	return changelog.NewFollower(changelog.FollowerConfig[*registryv1.Change]{
		Name: "registry", Source: w.reg, List: w.list, Apply: w.apply,
		MinBackoff: time.Second, MaxBackoff: 30 * time.Second, StallTimeout: stall, Logger: w.lg,
	})
}

// list reads every server and class, replacing what w held, and returns
// the revision the servers were read at (the watch resumes after it; a
// class change in between is replayed and compared, so it queues nothing
// twice).
func (w *registryWatch) list(ctx context.Context) (int64, error) {
	servers, rev, err := w.reg.Servers(ctx)
	if err != nil {
		return 0, err
	}
	all, err := w.reg.AudienceClasses(ctx, "")
	if err != nil {
		return 0, err
	}
	w.known = map[string]*registryv1.Server{}
	for _, srv := range servers {
		w.known[srv.GetServerId()] = srv
	}
	w.classes = map[string]map[string]string{}
	for _, c := range all {
		w.classes[c.GetName()] = bindings(c)
	}
	return rev, nil
}

// apply queues the scans one change calls for. A failure to queue is
// logged, not returned: the periodic refresh covers the pair.
func (w *registryWatch) apply(ctx context.Context, _ int64, ch *registryv1.Change) error {
	var pairs [][2]string
	switch obj := ch.GetObject().(type) {
	case *registryv1.Change_Server:
		srv := obj.Server
		old := w.known[srv.GetServerId()]
		w.known[srv.GetServerId()] = srv
		if ch.GetKind() == registryv1.ChangeKind_CHANGE_KIND_DELETED || !materialServerChange(old, srv) {
			return nil
		}
		for name, b := range w.classes {
			if _, ok := b[srv.GetServerId()]; ok {
				pairs = append(pairs, [2]string{srv.GetServerId(), name})
			}
		}
	case *registryv1.Change_AudienceClass:
		c := obj.AudienceClass
		old := w.classes[c.GetName()]
		now := bindings(c)
		w.classes[c.GetName()] = now
		if ch.GetKind() == registryv1.ChangeKind_CHANGE_KIND_DELETED {
			delete(w.classes, c.GetName())
			return nil
		}
		for server, ref := range now {
			if prev, ok := old[server]; !ok || prev != ref {
				pairs = append(pairs, [2]string{server, c.GetName()})
			}
		}
	}
	if len(pairs) > 0 {
		slices.SortFunc(pairs, func(a, b [2]string) int {
			if a[0] != b[0] {
				return compare(a[0], b[0])
			}
			return compare(a[1], b[1])
		})
		if err := w.enqueue(ctx, pairs); err != nil {
			w.lg.WarnContext(ctx, "queue scans for a registry change", "error", err)
		}
	}
	return nil
}

func bindings(c *registryv1.AudienceClass) map[string]string {
	m := map[string]string{}
	for _, b := range c.GetServers() {
		m[b.GetServerId()] = b.GetSecretRef()
	}
	return m
}

// materialServerChange reports whether a server change can change what a
// scan sees or trusts: a new server, or another transport, trust level,
// revision source or pin — except discovery's own first-use pin (an empty
// pin becoming set), which must not cause a rescan.
func materialServerChange(old, cur *registryv1.Server) bool {
	if old == nil {
		return true
	}
	a, b := proto.Clone(old).(*registryv1.Server), proto.Clone(cur).(*registryv1.Server)
	if a.GetIdentityPin() == "" {
		b.IdentityPin = ""
	}
	for _, x := range []*registryv1.Server{a, b} {
		x.DisplayName, x.Owner, x.Description, x.Version, x.CreatedAt, x.UpdatedAt, x.ScanInterval = "", "", "", 0, nil, nil, nil
	}
	return !proto.Equal(a, b)
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
