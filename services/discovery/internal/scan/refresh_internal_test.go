package scan

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
)

// stallingRegistry lists one server and one class at revision 5. Its first
// Watch stream is silent for ever (no change, no heartbeat: a registry
// that hung, or a connection that died without a reset); the next ones
// send a heartbeat at 5, then the class binding the server at 6, then stay
// silent.
type stallingRegistry struct {
	registryclient.Registry // only the methods below are called

	mu      sync.Mutex
	lists   int
	watches []watchCall
}

type watchCall struct {
	from int64
	at   time.Time
}

func (r *stallingRegistry) Servers(context.Context) ([]*registryv1.Server, int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lists++
	return []*registryv1.Server{{ServerId: "inv"}}, 5, nil
}

func (r *stallingRegistry) AudienceClasses(context.Context, string) ([]*registryv1.AudienceClass, error) {
	return []*registryv1.AudienceClass{{Name: "tenant-a.readers"}}, nil
}

func (r *stallingRegistry) Watch(ctx context.Context, from int64) (changelog.Stream[*registryv1.Change], error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watches = append(r.watches, watchCall{from, time.Now()})
	if len(r.watches) == 1 {
		return &scripted{ctx: ctx}, nil
	}
	bind := &registryv1.Change{Revision: 6, Kind: registryv1.ChangeKind_CHANGE_KIND_UPDATED,
		Object: &registryv1.Change_AudienceClass{AudienceClass: &registryv1.AudienceClass{Name: "tenant-a.readers",
			Servers: []*registryv1.AudienceServer{{ServerId: "inv"}}}}}
	return &scripted{ctx: ctx, msgs: []changelog.Message[*registryv1.Change]{
		{Revision: 5, Heartbeat: true}, {Change: bind, Revision: 6}}}, nil
}

func (r *stallingRegistry) calls() (lists int, watches []watchCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lists, slices.Clone(r.watches)
}

// scripted sends its messages, then is silent until its context ends.
type scripted struct {
	ctx  context.Context
	msgs []changelog.Message[*registryv1.Change]
}

func (s *scripted) Recv() (changelog.Message[*registryv1.Change], error) {
	if len(s.msgs) > 0 {
		m := s.msgs[0]
		s.msgs = s.msgs[1:]
		return m, nil
	}
	<-s.ctx.Done()
	return changelog.Message[*registryv1.Change]{}, s.ctx.Err()
}

// TestARegistryStreamThatStallsIsResumed: discovery follows the registry
// with the changelog follower, so a Watch stream that goes silent is
// dropped after the stall timeout and resumed from the listed revision
// (not re-listed), and the change the new stream carries queues the scan
// of the pair it binds.
func TestARegistryStreamThatStallsIsResumed(t *testing.T) {
	const stall = 300 * time.Millisecond
	reg := &stallingRegistry{}
	var mu sync.Mutex
	var queued [][2]string
	w := &registryWatch{reg: reg, lg: slog.New(slog.DiscardHandler), enqueue: func(_ context.Context, pairs [][2]string) error {
		mu.Lock()
		defer mu.Unlock()
		queued = append(queued, pairs...)
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.follower(stall).Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	servicetest.Eventually(t, 10*time.Second, "the scan of the newly bound pair queued", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(queued) > 0
	})
	mu.Lock()
	got := slices.Clone(queued)
	mu.Unlock()
	if len(got) != 1 || got[0] != [2]string{"inv", "tenant-a.readers"} {
		t.Fatalf("queued %v, want the one pair (inv, tenant-a.readers)", got)
	}
	lists, watches := reg.calls()
	if lists != 1 {
		t.Fatalf("listed %d times, want 1: a stalled stream resumes from its revision", lists)
	}
	if len(watches) < 2 || watches[0].from != 5 || watches[1].from != 5 {
		t.Fatalf("watch calls %v, want two from revision 5 (the listed one)", watches)
	}
	if gap := watches[1].at.Sub(watches[0].at); gap < stall {
		t.Fatalf("the silent stream was dropped after %v, before the stall timeout %v", gap, stall)
	}
}
