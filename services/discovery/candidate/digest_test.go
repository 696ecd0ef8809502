package candidate

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
)

// awkward are strings that encoding/json escapes and RFC 8785 does not, or
// the other way round.
var awkward = []string{"", "plain", `quo"te`, `back\slash`, "tab\tnew\nline\r", "\x00\x01\x1f\x7f", "<html>&amp;",
	"\u2028\u2029", "é ü 中文", "😀 \U0010FFFF", "/slash/", "sha256:" + strings.Repeat("ab", 32)}

func randomSnapshot(r *rand.Rand) *catalogv1.Snapshot {
	pick := func() string { return awkward[r.IntN(len(awkward))] }
	nums := []int64{0, 1, -1, 42, 1 << 53, 1<<53 + 1, math.MaxInt64, math.MinInt64, -(1<<53 + 3)}
	s := &catalogv1.Snapshot{
		Schema: pick(), ServerId: pick(), IdentityDigest: pick(), EndpointDigest: pick(), ProtocolVersion: pick(),
		AudienceClass: pick(), Tenant: pick(), SourceRevision: pick(), PageRoot: pick(), RunId: pick(),
		CacheScope: pick(), TrustConfigDigest: pick(),
		DiscoveryStartedAt: timestamppb.New(time.Unix(r.Int64N(1<<34), r.Int64N(1e9))),
		ExpiresAt:          timestamppb.New(time.Unix(r.Int64N(1<<34), r.Int64N(1e9))),
		PolicyEpoch:        nums[r.IntN(len(nums))], Generation: nums[r.IntN(len(nums))],
	}
	for range r.IntN(4) {
		s.PageDigests = append(s.PageDigests, pick())
	}
	for range r.IntN(5) {
		s.Tools = append(s.Tools, &catalogv1.ToolDescriptor{ToolId: pick(), Name: pick(), DescriptorDigest: pick(),
			InputSchemaDigest: pick(), OutputSchemaDigest: pick()})
	}
	return s
}

// TestSnapshotDigestWritesWhatCanonicalMarshalWrites: the direct writer of
// the snapshot digest's JSON gives exactly the bytes of canonical.Marshal
// over the same input, for strings that need escaping, integers past 2^53
// and empty lists; a string that is not UTF-8 takes the slow path.
func TestSnapshotDigestWritesWhatCanonicalMarshalWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	states := []catalogv1.DiscoveryState{catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE,
		catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION}
	for i := range 2000 {
		s, state := randomSnapshot(r), states[i%2]
		want, err := canonical.Marshal(digestInputOf(s, state))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendDigestJSON(nil, s, state)
		if !ok || string(got) != string(want) {
			t.Fatalf("snapshot %d (ok %v):\n got %s\nwant %s", i, ok, got, want)
		}
		if d, err := SnapshotDigest(s, state); err != nil || d != canonical.DigestBytes(want) {
			t.Fatalf("snapshot %d: digest %s %v", i, d, err)
		}
	}
	s := randomSnapshot(r)
	s.SourceRevision = "bad \xff utf-8"
	if _, ok := appendDigestJSON(nil, s, states[0]); ok {
		t.Fatal("invalid UTF-8 took the direct path")
	}
	want, err := canonical.DigestValue(digestInputOf(s, states[0]))
	if d, err2 := SnapshotDigest(s, states[0]); err != nil || err2 != nil || d != want {
		t.Fatalf("invalid UTF-8: digest %s, want %s (%v %v)", d, want, err, err2)
	}
}
