package changelog_test

import (
	"github.com/toolcrib/toolcrib/platform/servicetest"

	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// watchServer is a DiscoveryService whose Watch is the shared server over
// an in-memory log; it records every from_revision asked.
type watchServer struct {
	discoveryv1.UnimplementedDiscoveryServiceServer
	log   *changelog.Memory
	srv   changelog.Server
	mu    sync.Mutex
	froms []int64
}

func (w *watchServer) Watch(req *discoveryv1.WatchRequest, stream discoveryv1.DiscoveryService_WatchServer) error {
	w.mu.Lock()
	w.froms = append(w.froms, req.GetFromRevision())
	w.mu.Unlock()
	return w.srv.Serve(stream.Context(), changelog.Viewer{All: true}, req.GetFromRevision(), func(ev changelog.Event) error {
		if ev.Entry == nil {
			return stream.Send(&discoveryv1.WatchResponse{Event: &discoveryv1.WatchResponse_Heartbeat{Heartbeat: heartbeat(ev.Head)}})
		}
		m := &discoveryv1.PointerChange{}
		if err := proto.Unmarshal(ev.Entry.Payload, m); err != nil {
			return err
		}
		m.Revision = ev.Entry.Revision
		return stream.Send(&discoveryv1.WatchResponse{Event: &discoveryv1.WatchResponse_Change{Change: m}})
	})
}

func heartbeat(rev int64) *catalogv1.Heartbeat { return &catalogv1.Heartbeat{Revision: rev} }

func (w *watchServer) watches() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.froms)
}

// add appends one pointer move of server id.
func (w *watchServer) add(t *testing.T, id string) int64 {
	t.Helper()
	b, err := proto.Marshal(&discoveryv1.PointerChange{Pointer: &discoveryv1.ActivePointer{ServerId: id}})
	if err != nil {
		t.Fatal(err)
	}
	return w.log.Append("pointer", b, nil).Revision
}

// consumer records what the follower gave it.
type consumer struct {
	ws      *watchServer
	mu      sync.Mutex
	lists   []int64
	applied []int64
}

func (c *consumer) list(ctx context.Context) (int64, error) {
	rev, err := c.ws.log.Head(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists = append(c.lists, rev)
	c.applied = nil // a list replaces the state
	return rev, err
}

func (c *consumer) apply(_ context.Context, rev int64, _ *discoveryv1.PointerChange) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applied = append(c.applied, rev)
	return nil
}

func (c *consumer) snapshot() (lists, applied []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lists), slices.Clone(c.applied)
}

type followerEnv struct {
	ws    *watchServer
	proxy *servicetest.Proxy
	c     *consumer
	f     *changelog.Follower[*discoveryv1.PointerChange]
}

// startFollower serves an in-memory log (heartbeat 20 ms) behind a proxy
// and follows it.
func startFollower(t *testing.T, stall time.Duration) *followerEnv {
	t.Helper()
	ws := &watchServer{log: changelog.NewMemory()}
	ws.srv = changelog.Server{Feed: ws.log, Heartbeat: 20 * time.Millisecond, Relist: "test"}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	discoveryv1.RegisterDiscoveryServiceServer(gs, ws)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	px := servicetest.NewProxy(t, lis.Addr().String())
	conn, err := grpc.NewClient(px.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(principal.BearerToken("unused")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &consumer{ws: ws}
	f := changelog.NewFollower(changelog.FollowerConfig[*discoveryv1.PointerChange]{
		Name: "test", Source: changelog.DiscoverySource(discoveryv1.NewDiscoveryServiceClient(conn)),
		List: c.list, Apply: c.apply, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, StallTimeout: stall,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &followerEnv{ws: ws, proxy: px, c: c, f: f}
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A severed connection: the follower resumes from the last revision it
// applied, without listing again, and ends with every change exactly once
// in order.
func TestFollowerResumesAfterDisconnect(t *testing.T) {
	e := startFollower(t, time.Second)
	if _, err := e.f.WaitCaughtUp(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.ws.add(t, "a")
	}
	if _, err := e.f.WaitRevision(waitCtx(t), 3); err != nil {
		t.Fatal(err)
	}
	e.proxy.Sever()
	for range 4 {
		e.ws.add(t, "b")
	}
	time.Sleep(100 * time.Millisecond) // a few failed attempts
	if fr := e.f.Freshness(); fr.Revision != 3 || fr.Connected {
		t.Fatalf("while severed: %+v, want revision 3, not connected", fr)
	}
	e.proxy.Heal()
	if _, err := e.f.WaitRevision(waitCtx(t), 7); err != nil {
		t.Fatal(err)
	}
	lists, applied := e.c.snapshot()
	if !slices.Equal(lists, []int64{0}) || !slices.Equal(applied, []int64{1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("lists %v applied %v: want one list at 0 and 1..7 once each", lists, applied)
	}
	w := e.ws.watches()
	if w[0] != 0 || w[len(w)-1] != 3 {
		t.Fatalf("watches from %v: want the first from 0 and the resume from 3", w)
	}
}

// When the revision to resume from was compacted while the follower was
// away, it re-lists once and follows from the listed revision.
func TestFollowerResyncsAfterCompaction(t *testing.T) {
	e := startFollower(t, time.Second)
	if _, err := e.f.WaitCaughtUp(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	e.ws.add(t, "a")
	if _, err := e.f.WaitRevision(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	e.proxy.Sever()
	for range 5 {
		e.ws.add(t, "b")
	}
	e.ws.log.Compact(4) // the follower is at 1: 2..4 are gone
	e.proxy.Heal()
	if _, err := e.f.WaitRevision(waitCtx(t), 6); err != nil {
		t.Fatal(err)
	}
	e.ws.add(t, "c")
	if _, err := e.f.WaitRevision(waitCtx(t), 7); err != nil {
		t.Fatal(err)
	}
	lists, applied := e.c.snapshot()
	if !slices.Equal(lists, []int64{0, 6}) || !slices.Equal(applied, []int64{7}) {
		t.Fatalf("lists %v applied since the last list %v: want lists at 0 and 6, then 7", lists, applied)
	}
	if fr := e.f.Freshness(); fr.Lists != 2 {
		t.Fatalf("freshness %+v: want 2 lists", fr)
	}
}

// A stream that stays open but delivers nothing is not fresh once its last
// heartbeat is older than the window; the follower drops it after the stall
// timeout, and is fresh again once heartbeats flow.
func TestFollowerStalledStreamIsNotFresh(t *testing.T) {
	const window = 150 * time.Millisecond
	e := startFollower(t, 300*time.Millisecond)
	fr, err := e.f.WaitCaughtUp(waitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !fr.Fresh(time.Now(), window) {
		t.Fatalf("caught up but not fresh: %+v", fr)
	}
	e.proxy.Freeze()
	e.ws.add(t, "a") // committed, never delivered while frozen
	time.Sleep(2 * window)
	fr = e.f.Freshness()
	if fr.Fresh(time.Now(), window) {
		t.Fatalf("no heartbeat for %v and still fresh: %+v", 2*window, fr)
	}
	if fr.Revision != 0 {
		t.Fatalf("revision %d applied through a frozen stream", fr.Revision)
	}
	// The follower gives the silent stream up and reconnects.
	before := len(e.ws.watches())
	time.Sleep(400 * time.Millisecond)
	e.proxy.Thaw()
	e.proxy.Sever() // the frozen connection is dead weight: make gRPC dial anew
	e.proxy.Heal()
	fr, err = e.f.WaitCaughtUp(waitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !fr.Fresh(time.Now(), window) || fr.Revision != 1 {
		t.Fatalf("after the stall: %+v, want fresh at revision 1", fr)
	}
	if len(e.ws.watches()) <= before {
		t.Fatal("the follower never reconnected")
	}
}

// WaitCaughtUp waits for a heartbeat received after the call; ctx bounds
// it.
func TestFollowerWaitCaughtUpNeedsANewHeartbeat(t *testing.T) {
	e := startFollower(t, time.Second)
	if _, err := e.f.WaitCaughtUp(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	e.proxy.Sever()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := e.f.WaitCaughtUp(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("caught up through a severed connection: %v", err)
	}
	e.proxy.Heal()
	start := time.Now()
	fr, err := e.f.WaitCaughtUp(waitCtx(t))
	if err != nil || fr.At.Before(start) {
		t.Fatalf("WaitCaughtUp: %+v %v: want a heartbeat after the call", fr, err)
	}
}

// A broken stream is retried with backoff: with the source unreachable for
// a second, attempts stay few (exponential to MaxBackoff 100 ms, not a
// busy loop).
func TestFollowerBacksOff(t *testing.T) {
	ws := &countingSource{}
	f := changelog.NewFollower(changelog.FollowerConfig[*discoveryv1.PointerChange]{
		Source: ws, List: func(context.Context) (int64, error) { return 0, nil },
		Apply:      func(context.Context, int64, *discoveryv1.PointerChange) error { return nil },
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = f.Run(ctx)
	// 10+20+40+80 ms, then ≤100 ms each (jitter halves at most): between 10
	// and 25 attempts in a second.
	if n := ws.count(); n < 8 || n > 25 {
		t.Fatalf("%d attempts in 1s with backoff 10ms..100ms", n)
	}
}

type countingSource struct {
	mu sync.Mutex
	n  int
}

func (s *countingSource) Watch(context.Context, int64) (changelog.Stream[*discoveryv1.PointerChange], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return nil, io.ErrUnexpectedEOF
}

func (s *countingSource) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}
