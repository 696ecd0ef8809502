package registry_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/registry"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// watcher collects a Watch stream's changes in a goroutine.
type watcher struct {
	changes chan *registryv1.Change
	beats   chan int64
	done    chan error
	cancel  context.CancelFunc
}

func watch(t *testing.T, c registryv1.RegistryServiceClient, from int64) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Watch(ctx, &registryv1.WatchRequest{FromRevision: from})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &watcher{changes: make(chan *registryv1.Change, 1000), beats: make(chan int64, 1000), done: make(chan error, 1), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				w.done <- err
				return
			}
			if ch := msg.GetChange(); ch != nil {
				w.changes <- ch
			} else {
				w.beats <- msg.GetHeartbeat().GetRevision()
			}
		}
	}()
	return w
}

// next returns the next n changes, failing after 10 s.
func (w *watcher) next(t *testing.T, n int) []*registryv1.Change {
	t.Helper()
	var out []*registryv1.Change
	for len(out) < n {
		select {
		case ch := <-w.changes:
			out = append(out, ch)
		case err := <-w.done:
			t.Fatalf("stream ended after %d of %d changes: %v", len(out), n, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d changes within 10s", len(out), n)
		}
	}
	return out
}

// A Watch client sees every change in commit order; after a disconnect it
// resumes from the last revision it saw without a gap or a duplicate, and
// a list's revision is a gapless starting point too.
func TestWatchSeesEveryChangeInOrderAndResumes(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{})
	svc := r.Client(t, r.Auth.Service(t))
	w := watch(t, svc, 0)
	setup(t, r) // server, tenant, class (+ its policy bump): 4 changes
	first := w.next(t, 4)
	if first[0].GetServer().GetServerId() != server || first[1].GetTenant().GetTenantId() != tenant ||
		first[2].GetAudienceClass().GetName() != class || first[3].GetPolicy().GetCauseCode() != registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_AUDIENCE_CLASS {
		t.Fatalf("first changes out of order: %v", first)
	}
	if first[0].GetKind() != registryv1.ChangeKind_CHANGE_KIND_CREATED || first[0].GetCommittedAt() == nil {
		t.Fatalf("change %v", first[0])
	}

	// Many changes from several writers while the watcher reads, then a
	// disconnect half way.
	admin := r.Admin(t)
	ctx := ctxT(t)
	errs := make(chan error, 3)
	for g := range 3 {
		go func() {
			for i := range 10 {
				_, err := admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant,
					Subject: fmt.Sprintf("u%d", g), Scopes: []string{fmt.Sprintf("s:%d", i)}})
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	got := append(first, w.next(t, 20)...)
	w.cancel()
	last := got[len(got)-1].GetRevision()
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	w2 := watch(t, svc, last)
	got = append(got, w2.next(t, 34-len(got))...)
	for i, ch := range got {
		if ch.GetRevision() != int64(i+1) {
			t.Fatalf("position %d has revision %d: a gap or a duplicate", i, ch.GetRevision())
		}
	}
	epoch := int64(0)
	for _, ch := range got[4:] {
		p := ch.GetPolicy()
		if p.GetCauseCode() != registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_GRANT || p.GetGrant() == nil || (epoch != 0 && p.GetPolicyEpoch() != epoch+1) {
			t.Fatalf("grant change %v after epoch %d", ch, epoch)
		}
		epoch = p.GetPolicyEpoch()
	}
	select {
	case rev := <-w2.beats:
		if rev != 34 {
			t.Fatalf("heartbeat at %d, want 34", rev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no heartbeat")
	}

	// List, then watch from the list's revision: the next change is the
	// first one after the list.
	list, err := admin.ListServers(ctx, &registryv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	w3 := watch(t, svc, list.GetRevision())
	if _, err := admin.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: "tenant-z"}}); err != nil {
		t.Fatal(err)
	}
	if ch := w3.next(t, 1)[0]; ch.GetRevision() != list.GetRevision()+1 || ch.GetTenant().GetTenantId() != "tenant-z" {
		t.Fatalf("after list at %d got %v", list.GetRevision(), ch)
	}
}

// Resuming from a revision the registry no longer keeps is refused with
// FAILED_PRECONDITION REVISION_COMPACTED and a message telling the client
// to re-list; from 0 the stream starts at the oldest change kept.
func TestWatchFromCompactedRevision(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true, Configure: func(c *registry.Config) {
		c.WatchRetention, c.WatchKeep, c.CompactInterval = time.Millisecond, 2, 20*time.Millisecond
	}})
	ctx, admin, svc := ctxT(t), r.Admin(t), r.Client(t, r.Auth.Service(t))
	for i := range 6 {
		if _, err := admin.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: fmt.Sprintf("t%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	// Compaction runs in the background: wait until it kept only the newest
	// two (revisions 5 and 6), i.e. resuming from 3 needs a deleted change.
	deadline := time.Now().Add(10 * time.Second)
	for {
		stream, err := svc.Watch(ctx, &registryv1.WatchRequest{FromRevision: 3})
		if err == nil {
			_, err = stream.Recv()
		}
		if err != nil {
			st := wantCode(t, err, codes.FailedPrecondition, "REVISION_COMPACTED")
			if !strings.Contains(st.Message(), "re-list") {
				t.Fatalf("message %q does not tell the client to re-list", st.Message())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the log was not compacted within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The newest two are kept: resuming from 4 works, and 0 starts at 5.
	if got := watch(t, svc, 4).next(t, 2); got[0].GetRevision() != 5 || got[1].GetRevision() != 6 {
		t.Fatalf("resume from 4: %v", got)
	}
	if got := watch(t, svc, 0).next(t, 1); got[0].GetRevision() != 5 {
		t.Fatalf("watch from 0 starts at %d, want the oldest kept (5)", got[0].GetRevision())
	}
	stream, err := svc.Watch(ctx, &registryv1.WatchRequest{FromRevision: 99})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, err, codes.FailedPrecondition, "REVISION_AHEAD")
}

// When the registry shuts down, open Watch streams end with UNAVAILABLE
// DRAINING (the same as discovery's) so the drain finishes, and Run
// returns nil.
func TestWatchEndsWhenServerDrains(t *testing.T) {
	t.Parallel()
	auth := servicetest.NewAuth(t)
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: registry.Schema, Sets: registry.Migrations()})
	cfg, err := registry.ParseConfig([]string{"--discovery-addr="}, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	common := auth.Common(t, url, false, nil)
	common.ShutdownTimeout = 10 * time.Second
	cfg.Common = common
	addrc := make(chan string, 1)
	cfg.Listening = func(a string) { addrc <- a }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- registry.Run(ctx, cfg) }()
	addr := <-addrc
	servicetest.WaitServing(t, addr, 30*time.Second)
	w := watch(t, registryv1.NewRegistryServiceClient(servicetest.Dial(t, addr, auth.Admin(t))), 0)
	select {
	case <-w.beats: // the stream is up
	case <-time.After(5 * time.Second):
		t.Fatal("no heartbeat")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-w.done:
		wantCode(t, err, codes.Unavailable, changelog.ReasonDraining)
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end on shutdown")
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown took %v: the drain waited for the stream", d)
	}
}
