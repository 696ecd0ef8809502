package watchtest

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
)

// The two tenants every target sets up.
const (
	TenantA = "tenant-a"
	TenantB = "tenant-b"
)

// Caller is who opens a stream; a target presents a token of that kind.
type Caller int

// The callers the suite uses.
const (
	// Admin is a platform admin.
	Admin Caller = iota
	// Service is a toolcrib service principal.
	Service
	// UserA is a principal of [TenantA] (no admin or service group).
	UserA
	// UserB is a principal of [TenantB].
	UserB
	// NoTenant is a principal with neither a tenant nor a platform role.
	NoTenant
)

// Message is one Watch message, reduced to what the contract is about.
type Message struct {
	// Heartbeat is true for a heartbeat.
	Heartbeat bool
	// Revision is the change's revision or the heartbeat's head.
	Revision int64
	// Tenant is the tenant the change belongs to (the target's reading of
	// its payload); empty for a heartbeat.
	Tenant string
}

// Stream is an open Watch stream; Recv returns gRPC status errors as the
// client sees them.
type Stream interface {
	Recv() (Message, error)
}

// Target is one implementation of a Watch RPC, fresh for each contract
// test: its tenants [TenantA] and [TenantB] exist, and its change log may
// already hold changes of the setup.
type Target struct {
	// Open opens a stream as who from revision from.
	Open func(ctx context.Context, who Caller, from int64) (Stream, error)
	// Commit makes at least one change that only tenant's principals (and
	// admins and services) see, and returns the revision of the last change
	// it made.
	Commit func(t testing.TB, tenant string) int64
	// Compact forgets every change up to and including revision through.
	Compact func(t testing.TB, through int64)
	// Drain starts the shutdown of the service (the last thing a test does).
	Drain func(t testing.TB)
	// Heartbeat is the heartbeat interval the target runs with; at least
	// 200 ms, so that the first heartbeat (due right after the backlog) is
	// told apart from the first interval.
	Heartbeat time.Duration
}

// RegistryOpener returns a [Target.Open] over RegistryService clients.
func RegistryOpener(client func(Caller) registryv1.RegistryServiceClient) func(context.Context, Caller, int64) (Stream, error) {
	return func(ctx context.Context, who Caller, from int64) (Stream, error) {
		st, err := client(who).Watch(ctx, &registryv1.WatchRequest{FromRevision: from})
		if err != nil {
			return nil, err
		}
		return streamFunc(func() (Message, error) {
			for {
				r, err := st.Recv()
				if err != nil {
					return Message{}, err
				}
				if hb := r.GetHeartbeat(); hb != nil {
					return Message{Heartbeat: true, Revision: hb.GetRevision()}, nil
				}
				if ch := r.GetChange(); ch != nil {
					return Message{Revision: ch.GetRevision(), Tenant: registryTenant(ch)}, nil
				}
			}
		}), nil
	}
}

// registryTenant is the tenant a registry change belongs to; empty for a
// server or a tool (covered by classes of any number of tenants).
func registryTenant(ch *registryv1.Change) string {
	switch o := ch.GetObject().(type) {
	case *registryv1.Change_Tenant:
		return o.Tenant.GetTenantId()
	case *registryv1.Change_AudienceClass:
		return o.AudienceClass.GetTenantId()
	case *registryv1.Change_Policy:
		return o.Policy.GetTenantId()
	case *registryv1.Change_RolloutStage:
		return o.RolloutStage.GetTenantId()
	}
	return ""
}

// DiscoveryOpener returns a [Target.Open] over DiscoveryService clients.
func DiscoveryOpener(client func(Caller) discoveryv1.DiscoveryServiceClient) func(context.Context, Caller, int64) (Stream, error) {
	return func(ctx context.Context, who Caller, from int64) (Stream, error) {
		st, err := client(who).Watch(ctx, &discoveryv1.WatchRequest{FromRevision: from})
		if err != nil {
			return nil, err
		}
		return streamFunc(func() (Message, error) {
			for {
				r, err := st.Recv()
				if err != nil {
					return Message{}, err
				}
				if hb := r.GetHeartbeat(); hb != nil {
					return Message{Heartbeat: true, Revision: hb.GetRevision()}, nil
				}
				if ch := r.GetChange(); ch != nil {
					return Message{Revision: ch.GetRevision(), Tenant: ch.GetPointer().GetTenantId()}, nil
				}
			}
		}), nil
	}
}

type streamFunc func() (Message, error)

func (f streamFunc) Recv() (Message, error) { return f() }

// Run runs every contract test, each against a fresh target from newTarget.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	tests := []struct {
		name string
		fn   func(*testing.T, Target)
	}{
		{"GaplessOrderAndResume", testGaplessOrderAndResume},
		{"ZeroIsOldestKeptAndCompaction", testCompaction},
		{"AheadAndNegative", testAheadAndNegative},
		{"HeartbeatCadence", testHeartbeatCadence},
		{"TenantFiltering", testTenantFiltering},
		{"Drain", testDrain},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newTarget(t)) })
	}
}

// watcher collects one stream in the background.
type watcher struct {
	msgs chan Message
	done chan error
}

func open(t *testing.T, tg Target, who Caller, from int64) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := tg.Open(ctx, who, from)
	if err != nil {
		t.Fatalf("open a watch from %d: %v", from, err)
	}
	w := &watcher{msgs: make(chan Message, 10_000), done: make(chan error, 1)}
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				w.done <- err
				return
			}
			w.msgs <- m
		}
	}()
	return w
}

// until collects changes until a heartbeat reports at least rev, and
// returns the changes.
func (w *watcher) until(t *testing.T, rev int64) []Message {
	t.Helper()
	var out []Message
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m := <-w.msgs:
			if !m.Heartbeat {
				out = append(out, m)
				continue
			}
			if m.Revision >= rev {
				return out
			}
		case err := <-w.done:
			t.Fatalf("the stream ended before a heartbeat at %d: %v (changes so far %v)", rev, err, out)
		case <-deadline:
			t.Fatalf("no heartbeat at or past %d within 15s (changes so far %v)", rev, out)
		}
	}
}

// end waits for the stream to end and returns its error.
func (w *watcher) end(t *testing.T, within time.Duration) error {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case <-w.msgs:
		case err := <-w.done:
			return err
		case <-deadline:
			t.Fatalf("the stream did not end within %v", within)
		}
	}
}

// openErr opens a stream expected to fail and returns its error.
func openErr(t *testing.T, tg Target, who Caller, from int64) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := tg.Open(ctx, who, from)
	for err == nil {
		var m Message
		if m, err = st.Recv(); err == nil && !m.Heartbeat {
			t.Fatalf("watch from %d as caller %d: got change %d, want an error", from, who, m.Revision)
		} else if err == nil {
			t.Fatalf("watch from %d as caller %d: got a heartbeat, want an error", from, who)
		}
	}
	return err
}

// wantStatus checks a gRPC error's code and ErrorInfo reason (none when
// reason is empty) and returns its ErrorInfo metadata.
func wantStatus(t *testing.T, err error, code codes.Code, reason string) map[string]string {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		t.Fatalf("error %v, want %v", err, code)
	}
	if reason == "" {
		return nil
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.GetReason() != reason {
				t.Fatalf("reason %q, want %q (%v)", info.GetReason(), reason, err)
			}
			return info.GetMetadata()
		}
	}
	t.Fatalf("error %v has no ErrorInfo, want reason %q", err, reason)
	return nil
}

func revisions(ms []Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.Revision
	}
	return out
}

// gapless reports whether revs are consecutive.
func gapless(revs []int64) bool {
	for i := 1; i < len(revs); i++ {
		if revs[i] != revs[i-1]+1 {
			return false
		}
	}
	return true
}

// An admin stream from 0 carries every change kept, in revision order,
// without a gap, then each new change; resuming from any revision k sends
// exactly the changes after k.
func testGaplessOrderAndResume(t *testing.T, tg Target) {
	w := open(t, tg, Admin, 0)
	var last int64
	for i := range 6 {
		last = tg.Commit(t, []string{TenantA, TenantB}[i%2])
	}
	got := revisions(w.until(t, last))
	if len(got) == 0 || got[len(got)-1] != last || !gapless(got) {
		t.Fatalf("revisions from 0: %v, want consecutive up to %d", got, last)
	}
	if got[0] != 1 {
		t.Fatalf("nothing was compacted, yet the stream from 0 starts at %d", got[0])
	}
	k := got[len(got)/2]
	resumed := revisions(open(t, tg, Admin, k).until(t, last))
	if want := got[slices.Index(got, k)+1:]; !slices.Equal(resumed, want) {
		t.Fatalf("resume from %d: %v, want %v", k, resumed, want)
	}
	// A new change reaches an open stream.
	next := tg.Commit(t, TenantA)
	more := revisions(w.until(t, next))
	if len(more) == 0 || more[0] != last+1 || more[len(more)-1] != next || !gapless(more) {
		t.Fatalf("after %d the open stream got %v, want consecutive up to %d", last, more, next)
	}
}

// 0 means the oldest change still kept, even when revision 1 is gone; a
// revision older than that is FAILED_PRECONDITION REVISION_COMPACTED; the
// last compacted revision itself is a valid resume point.
func testCompaction(t *testing.T, tg Target) {
	var last int64
	for range 5 {
		last = tg.Commit(t, TenantA)
	}
	through := last - 2
	tg.Compact(t, through)
	got := revisions(open(t, tg, Service, 0).until(t, last))
	if len(got) == 0 || got[0] != through+1 || got[len(got)-1] != last || !gapless(got) {
		t.Fatalf("watch from 0 after compacting through %d: %v, want %d..%d", through, got, through+1, last)
	}
	md := wantStatus(t, openErr(t, tg, Service, through-1), codes.FailedPrecondition, changelog.ReasonCompacted)
	if md["from_revision"] == "" {
		t.Fatalf("REVISION_COMPACTED metadata %v: want from_revision", md)
	}
	if got := revisions(open(t, tg, Service, through).until(t, last)); !slices.Equal(got, []int64{through + 1, through + 2}) {
		t.Fatalf("resume from %d (the last compacted): %v", through, got)
	}
}

// A revision past the head is FAILED_PRECONDITION REVISION_AHEAD; a
// negative one INVALID_ARGUMENT.
func testAheadAndNegative(t *testing.T, tg Target) {
	head := tg.Commit(t, TenantA)
	wantStatus(t, openErr(t, tg, Admin, head+100), codes.FailedPrecondition, changelog.ReasonAhead)
	wantStatus(t, openErr(t, tg, Admin, -1), codes.InvalidArgument, "INVALID_ARGUMENT")
}

// The first heartbeat comes right after the backlog (well before one
// interval), then one every interval, each carrying the head.
func testHeartbeatCadence(t *testing.T, tg Target) {
	head := tg.Commit(t, TenantB)
	start := time.Now()
	w := open(t, tg, Admin, 0)
	var beats []time.Time
	for len(beats) < 6 {
		select {
		case m := <-w.msgs:
			if !m.Heartbeat {
				continue
			}
			if m.Revision < head {
				t.Fatalf("heartbeat at %d, the head is %d", m.Revision, head)
			}
			beats = append(beats, time.Now())
		case err := <-w.done:
			t.Fatalf("stream ended: %v", err)
		case <-time.After(10*tg.Heartbeat + 5*time.Second):
			t.Fatalf("%d heartbeats only", len(beats))
		}
	}
	if first := beats[0].Sub(start); first > tg.Heartbeat*3/4 {
		t.Fatalf("first heartbeat after %v, interval %v: it must come right after the backlog", first, tg.Heartbeat)
	}
	// Five intervals: never faster than the interval (less timer slack),
	// and not much slower on a loaded machine.
	span := beats[5].Sub(beats[0])
	if span < 5*tg.Heartbeat*9/10 || span > 10*tg.Heartbeat+time.Second {
		t.Fatalf("5 heartbeat intervals took %v, configured %v each", span, tg.Heartbeat)
	}
}

// A tenant's stream carries only its tenant's changes, every one of them,
// and its heartbeats still reach the head past the other tenant's changes;
// services see everything; a principal with no tenant and no platform role
// is PERMISSION_DENIED.
func testTenantFiltering(t *testing.T, tg Target) {
	all := open(t, tg, Service, 0)
	a := open(t, tg, UserA, 0)
	b := open(t, tg, UserB, 0)
	var last int64
	for i := range 6 {
		last = tg.Commit(t, []string{TenantA, TenantA, TenantB}[i%3])
	}
	last = tg.Commit(t, TenantB) // the newest change is tenant-b's
	every := all.until(t, last)
	if got := revisions(every); !gapless(got) || got[len(got)-1] != last {
		t.Fatalf("service stream %v: want every change up to %d", got, last)
	}
	for _, c := range []struct {
		tenant string
		w      *watcher
	}{{TenantA, a}, {TenantB, b}} {
		// until(last) returning proves the heartbeats reached the head,
		// although for tenant-a the newest changes are not its own.
		got := c.w.until(t, last)
		var want []int64
		for _, m := range every {
			if m.Tenant == c.tenant {
				want = append(want, m.Revision)
			}
		}
		for _, m := range got {
			if m.Tenant != c.tenant {
				t.Fatalf("%s's stream carried change %d of %q", c.tenant, m.Revision, m.Tenant)
			}
		}
		if len(want) == 0 || !slices.Equal(revisions(got), want) {
			t.Fatalf("%s's stream: %v, want its changes %v", c.tenant, revisions(got), want)
		}
	}
	wantStatus(t, openErr(t, tg, NoTenant, 0), codes.PermissionDenied, "")
}

// Drain ends an open stream with UNAVAILABLE DRAINING, promptly.
func testDrain(t *testing.T, tg Target) {
	head := tg.Commit(t, TenantA)
	w := open(t, tg, Admin, 0)
	w.until(t, head)
	start := time.Now()
	tg.Drain(t)
	err := w.end(t, 10*time.Second)
	if errors.Is(err, io.EOF) {
		t.Fatal("the stream ended with OK, want UNAVAILABLE DRAINING")
	}
	wantStatus(t, err, codes.Unavailable, changelog.ReasonDraining)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the drain took %v to end the stream", d)
	}
}
