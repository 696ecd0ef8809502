package watch

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

// activeSnapshots answers GetActiveSnapshot with generation 1 and one tool
// for every pair, counting the reads of each server.
type activeSnapshots struct {
	discoveryv1.DiscoveryServiceClient
	mu    sync.Mutex
	reads map[string]int
}

func (a *activeSnapshots) GetActiveSnapshot(_ context.Context, req *discoveryv1.GetActiveSnapshotRequest, _ ...grpc.CallOption) (*discoveryv1.GetActiveSnapshotResponse, error) {
	a.mu.Lock()
	a.reads[req.GetServerId()]++
	a.mu.Unlock()
	return &discoveryv1.GetActiveSnapshotResponse{Pointer: &discoveryv1.ActivePointer{Generation: 1},
		Snapshot: &catalogv1.Snapshot{Tools: []*catalogv1.ToolDescriptor{{ToolId: req.GetServerId() + ".t", DescriptorDigest: "sha256:d"}}}}, nil
}

// TestDigestSetsAreABoundedLRU: past maxDigestSets pairs the least recently
// used set is dropped (read again when needed), not every one: the set of a
// pair in use is read once.
func TestDigestSetsAreABoundedLRU(t *testing.T) {
	disc := &activeSnapshots{reads: map[string]int{}}
	v := New(Options{Discovery: disc})
	ctx := context.Background()
	get := func(server string) {
		t.Helper()
		d, err := v.digestsOf(ctx, pair{server, "tenant-a.readers"}, 1)
		if err != nil || d[server+".t"] != "sha256:d" {
			t.Fatalf("%s: %v %v", server, d, err)
		}
	}
	get("first")
	get("hot")
	for i := range maxDigestSets {
		get(fmt.Sprintf("s%d", i))
		if i%500 == 0 {
			get("hot")
		}
	}
	get("hot")
	if n := v.digests.Len(); n != maxDigestSets {
		t.Fatalf("%d digest sets cached, want the bound %d", n, maxDigestSets)
	}
	get("first")
	if disc.reads["hot"] != 1 || disc.reads["first"] != 2 {
		t.Fatalf("reads: hot %d (want 1), first %d (want 2: dropped past the bound)", disc.reads["hot"], disc.reads["first"])
	}
}

// TestANewerGenerationIsReadNotAssumedStale: a binding to a generation
// newer than the followed pointer (admission's stream delivered it first)
// reads the pointer from discovery for that verdict instead of calling it
// stale, and does not keep the read (the stream stays the only writer),
// also past a followed close (a new generation reopens the server); a
// binding at or below the followed generation is answered without a read.
func TestANewerGenerationIsReadNotAssumedStale(t *testing.T) {
	disc := &activeSnapshots{reads: map[string]int{}}
	v := New(Options{Discovery: disc})
	ctx := context.Background()
	k := pair{"inventory", "acme.readers"}
	v.pointers[k] = pointer{generation: 0}
	p, err := v.pointerFor(ctx, k, 1)
	if err != nil || p.generation != 1 || disc.reads["inventory"] != 1 {
		t.Fatalf("generation 1 over a followed 0: %+v %v, %d reads", p, err, disc.reads["inventory"])
	}
	if v.pointers[k].generation != 0 {
		t.Fatalf("the read was kept: %+v", v.pointers[k])
	}
	if p, err := v.pointerFor(ctx, k, 0); err != nil || p.generation != 0 || disc.reads["inventory"] != 1 {
		t.Fatalf("the followed generation: %+v %v, %d reads", p, err, disc.reads["inventory"])
	}
	v.pointers[k] = pointer{generation: 1, closed: true}
	if p, err := v.pointerFor(ctx, k, 1); err != nil || !p.closed || disc.reads["inventory"] != 1 {
		t.Fatalf("the generation of a followed close: %+v %v, %d reads", p, err, disc.reads["inventory"])
	}
	v.pointers[k] = pointer{generation: 0, closed: true}
	if p, err := v.pointerFor(ctx, k, 1); err != nil || p.closed || p.generation != 1 || disc.reads["inventory"] != 2 {
		t.Fatalf("a generation newer than a followed close (reopened): %+v %v, %d reads", p, err, disc.reads["inventory"])
	}
}
