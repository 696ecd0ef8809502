package directory

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/secretref"
)

// snapshots is a discovery that serves one tool in every generation and
// counts the reads of each.
type snapshots struct {
	discoveryv1.DiscoveryServiceClient
	reads map[int64]int
}

func (s *snapshots) GetSnapshot(_ context.Context, req *discoveryv1.GetSnapshotRequest, _ ...grpc.CallOption) (*discoveryv1.GetSnapshotResponse, error) {
	s.reads[req.GetGeneration()]++
	return &discoveryv1.GetSnapshotResponse{Snapshot: &catalogv1.Snapshot{Generation: req.GetGeneration(),
		Tools: []*catalogv1.ToolDescriptor{{Name: "t", DescriptorDigest: "sha256:d", Raw: []byte(`{"name":"t"}`)}}}}, nil
}

// TestSnapshotCacheIsABoundedLRU: past maxCached generations the least
// recently used one is forgotten, not every one: a generation in use is
// read from discovery once.
func TestSnapshotCacheIsABoundedLRU(t *testing.T) {
	disc := &snapshots{reads: map[int64]int{}}
	d := New(nil, disc, secretref.Policy{}, nil)
	ctx := context.Background()
	get := func(gen int64) {
		t.Helper()
		if desc, err := d.Descriptor(ctx, "srv", "tenant.readers", gen, "sha256:d"); err != nil || desc.Name != "t" {
			t.Fatalf("generation %d: %v %v", gen, desc, err)
		}
	}
	const first, hot = 1, 2
	get(first)
	get(hot)
	for gen := int64(3); gen < 3+maxCached; gen++ {
		get(gen)
		if gen%500 == 0 {
			get(hot)
		}
	}
	get(hot)
	if n := d.snapshots.Len(); n != maxCached {
		t.Fatalf("%d generations cached, want the bound %d", n, maxCached)
	}
	if disc.reads[hot] != 1 {
		t.Fatalf("the generation in use was read %d times, want 1", disc.reads[hot])
	}
	get(first)
	if disc.reads[first] != 2 {
		t.Fatalf("the least recently used generation was read %d times, want 2 (forgotten past the bound)", disc.reads[first])
	}
}

// reviews is a registry answering GetToolReview with one contract and
// approval state per descriptor digest.
type reviews struct {
	registryv1.RegistryServiceClient
	by map[string]*registryv1.GetToolReviewResponse
}

func (r *reviews) GetToolReview(_ context.Context, req *registryv1.GetToolReviewRequest, _ ...grpc.CallOption) (*registryv1.GetToolReviewResponse, error) {
	return r.by[req.GetDescriptorDigest()], nil
}

// TestReviewAllowsSamplingOnlyWhenApproved: a contract allowing sampling
// grants it only while that contract is approved at the digest; one
// published since (unreviewed) grants nothing, and neither does an
// approved contract that does not allow it.
func TestReviewAllowsSamplingOnlyWhenApproved(t *testing.T) {
	allow := &registryv1.ToolContract{AllowSampling: true}
	reg := &reviews{by: map[string]*registryv1.GetToolReviewResponse{
		"sha256:approved-allows":   {Contract: allow, Approved: true, PolicyEpoch: 1},
		"sha256:unreviewed-allows": {Contract: allow, Approved: false, PolicyEpoch: 1},
		"sha256:approved-refuses":  {Contract: &registryv1.ToolContract{}, Approved: true, PolicyEpoch: 1},
		"sha256:no-contract":       {PolicyEpoch: 1},
	}}
	d := New(reg, nil, secretref.Policy{}, nil)
	for digest, want := range map[string]bool{"sha256:approved-allows": true, "sha256:unreviewed-allows": false,
		"sha256:approved-refuses": false, "sha256:no-contract": false} {
		r, err := d.Review(context.Background(), "srv.t", "tenant.readers", digest, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.AllowsSampling(); got != want {
			t.Errorf("%s: AllowsSampling %v, want %v", digest, got, want)
		}
	}
}
