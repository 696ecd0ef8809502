package scan

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/backoff"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
)

// Advisory lock namespaces (the two-key form, so pg_locks can count them):
// one lock per listened pair, and one per live process (its presence, so
// processes can share the pairs out).
const (
	lockSpaceListener int32 = 0x7463_6c31 // "tcl1"
	lockSpacePresence int32 = 0x7463_7031 // "tcp1"
)

// PresenceLockSpace is the first key of a process's presence lock
// (`pg_locks.classid`), for operators and tests reading pg_locks.
const PresenceLockSpace = lockSpacePresence

// listeners keeps one listening MCP session per (server, audience class)
// whose last committed scan saw `tools.listChanged` declared (the
// `listen_pairs` table), at most Config.MaxListeners in this process. A pair's
// listener belongs to the process holding the pair's advisory lock, taken on
// one connection of this process's own (a killed process's locks die with
// its connection, and another process picks the pairs up on its next
// sweep). Each sweep reads the pairs, counts the live processes (their
// presence locks) and takes free pairs up to this process's fair share,
// handing back pairs above it, so listeners spread over the processes.
//
// A scan that commits hands its session to the pair's listener when this
// process holds it or can take it (no gap between the scan and the
// listening); a listener that opens its own session (after a drop, or one
// taken over from another process) queues a LISTEN_RESUMED scan, since a
// change may have gone unheard. A dead session is found by its end or by a
// failed ping and opened again with backoff.
type listeners struct {
	s *Scanner

	mu       sync.Mutex
	conn     *pgxpool.Conn // holds the locks; nil until the first sweep
	presence int32
	held     map[[2]string]*listener
}

type listener struct {
	pair    [2]string
	handoff chan handoff
	stop    chan struct{}
	done    chan struct{}
}

// handoff is a committed scan's session given to the pair's listener;
// decided is its list_changed count when the crawl decided.
type handoff struct {
	sess    *crawl.Session
	decided int64
}

func newListeners(s *Scanner) *listeners {
	return &listeners{s: s, held: map[[2]string]*listener{}, presence: rand.Int32()}
}

func listenerKey(pair [2]string) int32 {
	h := fnv.New32a()
	h.Write([]byte(pair[0] + "\x00" + pair[1]))
	return int32(h.Sum32())
}

// lockConnLocked returns the lock connection, acquiring it (and the
// presence lock) when needed.
func (l *listeners) lockConnLocked(ctx context.Context) (*pgxpool.Conn, error) {
	if l.conn != nil {
		return l.conn, nil
	}
	c, err := l.s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	for ok := false; !ok; {
		// A random key, once more when another process drew the same one.
		if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockSpacePresence, l.presence).Scan(&ok); err != nil {
			c.Release()
			return nil, err
		}
		if !ok {
			l.presence = rand.Int32()
		}
	}
	l.conn = c
	return c, nil
}

// dropConnLocked stops every listener and closes the lock connection (its
// locks are gone with it).
func (l *listeners) dropConnLocked() {
	for pair, ln := range l.held {
		l.stopLocked(pair, ln, false)
	}
	if l.conn != nil {
		_ = l.conn.Conn().Close(context.Background())
		l.conn.Release()
		l.conn = nil
	}
	l.s.metrics.listeners.Set(0)
}

// tryTakeLocked takes a pair's lock and starts its listener (with first as
// its session when not nil).
func (l *listeners) tryTakeLocked(ctx context.Context, pair [2]string, first *handoff) (bool, error) {
	if len(l.held) >= l.s.cfg.MaxListeners {
		return false, nil
	}
	c, err := l.lockConnLocked(ctx)
	if err != nil {
		return false, err
	}
	var ok bool
	if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockSpaceListener, listenerKey(pair)).Scan(&ok); err != nil {
		l.dropConnLocked()
		return false, err
	}
	if !ok {
		return false, nil
	}
	ln := &listener{pair: pair, handoff: make(chan handoff, 1), stop: make(chan struct{}), done: make(chan struct{})}
	l.held[pair] = ln
	l.s.metrics.listeners.Set(float64(len(l.held)))
	l.s.background.Go(func() { l.run(ln, first) })
	return true, nil
}

// stopLocked stops a listener and, when unlock, gives its lock back.
func (l *listeners) stopLocked(pair [2]string, ln *listener, unlock bool) {
	close(ln.stop)
	delete(l.held, pair)
	l.s.metrics.listeners.Set(float64(len(l.held)))
	if unlock && l.conn != nil {
		if _, err := l.conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1, $2)`, lockSpaceListener, listenerKey(pair)); err != nil {
			l.dropConnLocked()
		}
	}
}

// adopt gives a committed scan's session to the pair's listener, starting
// one when this process may; false when the caller keeps the session.
func (l *listeners) adopt(ctx context.Context, pair [2]string, h handoff) bool {
	if l.s.cfg.MaxListeners <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ln := l.held[pair]; ln != nil {
		select {
		case old := <-ln.handoff: // not taken yet: this one is newer
			_ = old.sess.Close()
		default:
		}
		ln.handoff <- h
		return true
	}
	ok, err := l.tryTakeLocked(ctx, pair, &h)
	if err != nil {
		l.s.lg.WarnContext(ctx, "take a listener", "server", pair[0], "audience_class", pair[1], "error", err)
	}
	return ok
}

// drop stops this process's listener of the pair, if any.
func (l *listeners) drop(pair [2]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ln := l.held[pair]; ln != nil {
		l.stopLocked(pair, ln, true)
	}
}

// sweepLoop sweeps every Config.ListenSweep until ctx ends, then stops
// every listener.
func (l *listeners) sweepLoop(ctx context.Context) {
	defer func() {
		l.mu.Lock()
		l.dropConnLocked()
		l.mu.Unlock()
	}()
	if l.s.cfg.MaxListeners <= 0 {
		return
	}
	for {
		if err := l.sweep(ctx); err != nil && ctx.Err() == nil {
			l.s.lg.WarnContext(ctx, "listener sweep", "error", err)
		}
		// Jitter keeps processes from sweeping in lockstep.
		if !sleep(ctx, l.s.cfg.ListenSweep/2+rand.N(l.s.cfg.ListenSweep)) {
			return
		}
	}
}

// sweep brings the listeners of this process in line with the pairs to
// listen to and its fair share of them.
func (l *listeners) sweep(ctx context.Context) error {
	pairs, err := l.s.store.ListeningPairs(ctx)
	if err != nil {
		return err
	}
	want := make(map[[2]string]bool, len(pairs))
	for _, p := range pairs {
		want[p] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for pair, ln := range l.held {
		if !want[pair] {
			l.stopLocked(pair, ln, true)
		}
	}
	c, err := l.lockConnLocked(ctx)
	if err != nil {
		return err
	}
	var procs int
	// pg_locks shows every database of the cluster: only this database's
	// processes share this database's pairs (another deployment, or another
	// test, on the same cluster would otherwise shrink the fair share).
	if err := c.QueryRow(ctx, `SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::oid AND objsubid = 2 AND granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		uint32(lockSpacePresence)).Scan(&procs); err != nil {
		l.dropConnLocked()
		return err
	}
	share := min(l.s.cfg.MaxListeners, (len(pairs)+max(procs, 1)-1)/max(procs, 1))
	// Above the fair share (another process started): hand pairs back.
	for pair, ln := range l.held {
		if len(l.held) <= share {
			break
		}
		l.stopLocked(pair, ln, true)
	}
	rand.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	for _, pair := range pairs {
		if len(l.held) >= share {
			break
		}
		if l.held[pair] != nil {
			continue
		}
		if _, err := l.tryTakeLocked(ctx, pair, nil); err != nil {
			return err
		}
	}
	return nil
}

// errNotListening ends a listener: the pair is gone, or the server no
// longer declares tools.listChanged.
var errNotListening = errors.New("scan: the pair is no longer listened to")

// run is one listener: it listens on its session, hears list_changed,
// takes newer sessions from scans, and opens a session again (with
// backoff) when one dies.
func (l *listeners) run(ln *listener, first *handoff) {
	defer close(ln.done)
	defer func() {
		// Out of l.held by now (stopped or dropped): no scan hands it a
		// session any more; close one handed over meanwhile.
		select {
		case h := <-ln.handoff:
			_ = h.sess.Close()
		default:
		}
	}()
	s := l.s
	ctx := s.bg
	retry := backoff.New(time.Second, s.cfg.ListenBackoffMax)
	next := first
	for {
		if next == nil {
			sess, err := s.openListening(ctx, ln.pair)
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, errNotListening):
				if err := s.store.SetListening(ctx, ln.pair[0], ln.pair[1], false); err != nil {
					s.lg.WarnContext(ctx, "stop listening", "server", ln.pair[0], "audience_class", ln.pair[1], "error", err)
				}
				l.drop(ln.pair)
				return
			case err != nil:
				d := retry.Next()
				s.lg.WarnContext(ctx, "open a listening session", "server", ln.pair[0], "audience_class", ln.pair[1], "error", err, "retry_in", d)
				select {
				case <-ln.stop:
					return
				case h := <-ln.handoff:
					next = &h
				case <-time.After(d):
				}
				continue
			}
			next = &handoff{sess: sess}
			// A change may have gone unheard while nobody listened.
			s.gate.heard(ln.pair, discoveryv1.ScanTrigger_SCAN_TRIGGER_LISTEN_RESUMED)
		}
		opened := time.Now()
		next = l.listenOn(ln, *next)
		if next != nil {
			continue
		}
		select {
		case <-ln.stop:
			return
		default:
		}
		// A session that died soon after it opened is not reopened at
		// once: a flapping server costs a connection per backoff step.
		if time.Since(opened) < s.cfg.ListenBackoffMax {
			select {
			case <-ln.stop:
				return
			case h := <-ln.handoff:
				next = &h
			case <-time.After(retry.Next()):
			}
		} else {
			retry.Reset()
		}
	}
}

// listenOn listens on one session until it dies (nil), a newer session
// arrives (returned) or the listener stops (nil, after closing).
func (l *listeners) listenOn(ln *listener, h handoff) *handoff {
	s := l.s
	sess, seen := h.sess, h.decided
	defer sess.Close()
	dead := make(chan struct{})
	go func() { _ = sess.Wait(); close(dead) }()
	ping := time.NewTicker(s.cfg.ListenPing)
	defer ping.Stop()
	check := func() {
		if n := sess.ListChangedCount(); n > seen {
			seen = n
			s.gate.heard(ln.pair, discoveryv1.ScanTrigger_SCAN_TRIGGER_LIST_CHANGED)
		}
	}
	check() // heard between the crawl's decision and the hand-over
	for {
		select {
		case <-sess.ListChanged():
			check()
		case <-dead:
			check()
			return nil
		case <-sess.ListenEnded():
			check()
			s.lg.InfoContext(s.bg, "listen stream ended; reconnecting", "server", ln.pair[0], "audience_class", ln.pair[1])
			return nil
		case <-ping.C:
			if err := sess.Ping(s.bg); err != nil {
				check()
				s.lg.InfoContext(s.bg, "listening session lost; reconnecting", "server", ln.pair[0], "audience_class", ln.pair[1], "error", err)
				return nil
			}
		case next := <-ln.handoff:
			check()
			return &next
		case <-ln.stop:
			return nil
		}
	}
}

// openListening opens a session to listen on, as the pair's scan would
// (registry, credential, pinned identity). errNotListening when the pair is
// gone or the server no longer declares tools.listChanged.
func (s *Scanner) openListening(ctx context.Context, pair [2]string) (*crawl.Session, error) {
	srv, err := s.reg.Server(ctx, pair[0])
	if errors.Is(err, registryclient.ErrNotFound) {
		return nil, errNotListening
	}
	if err != nil {
		return nil, err
	}
	cls, err := s.audienceClass(ctx, pair[1], time.Now())
	if errors.Is(err, registryclient.ErrNotFound) {
		return nil, errNotListening
	}
	if err != nil {
		return nil, err
	}
	bind := binding(cls, pair[0])
	if bind == nil {
		return nil, errNotListening
	}
	credential, err := s.cfg.Secrets.Resolve(bind.GetSecretRef(), s.cfg.LookupEnv)
	if err != nil {
		return nil, err
	}
	target, err := targetOf(srv, credential)
	if err != nil {
		return nil, err
	}
	opts := s.cfg.Crawl
	opts.Versioned = srv.GetRevisionSource() == registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED
	sess, f := crawl.Open(ctx, target, opts)
	if f != nil {
		return nil, fmt.Errorf("%s: %s", f.Reason, f.Detail)
	}
	if !sess.ListChangedDeclared() {
		_ = sess.Close()
		return nil, errNotListening
	}
	return sess, nil
}

// afterCommit runs after a commit or refresh: it records whether the pair
// is to be listened to and hands the session to its listener, or lingers.
func (s *Scanner) afterCommit(st *scanState) {
	pair := [2]string{st.args.ServerID, st.args.AudienceClass}
	declared := st.sess.ListChangedDeclared() && s.cfg.MaxListeners > 0
	// Only a scan of the pair, holding its lock as this one does, adds the
	// pair: one that was not listed when the run started is not listed
	// now, and needs no delete.
	if declared || st.view.Listening {
		if err := s.store.SetListening(st.ctx, pair[0], pair[1], declared); err != nil {
			s.lg.WarnContext(st.ctx, "record the listening pair", "server", pair[0], "audience_class", pair[1], "error", err)
		}
	}
	if !declared {
		s.listen.drop(pair)
	} else if s.listen.adopt(st.ctx, pair, handoff{sess: st.sess, decided: st.decided}) {
		st.sess = nil
		return
	}
	s.linger(st, st.decided)
}
