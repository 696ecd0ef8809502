package admission

import (
	"testing"
	"time"

	oracle "github.com/toolcrib/toolcrib/e2e/admissionoracle"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/admission/admissiontest"
)

// FuzzCheckAgreesWithOracle decides arbitrary Check requests (tool ids,
// descriptor digests, generations, epochs, modes, run ids, classes and
// argument bytes) over random states with admission's decision package and
// with the oracle: never a panic, always the same reason. The seed corpus
// runs in every `go test`.
func FuzzCheckAgreesWithOracle(f *testing.F) {
	digest := rDigest(1)
	for _, c := range []struct {
		tool, digest, class, run string
		gen, epoch               int64
		mode                     int32
		args                     string
	}{
		{"inv.status", digest, "", "", 1, 0, 1, `{"shipment_id":"s-1"}`},
		{"inv.status", digest, "t-a.readers", "run-1", 2, 1, 2, `{}`},
		{"inv.status", digest, "t-b.readers", "", 1, 0, 1, ``},
		{"pay.cancel", digest, "t-a.ops", "r:1", 3, 2, 2, `{"units":2.0}`},
		{"inv.status", digest, "", "", 1, 0, 1, `{"a":1}x`},
		{"inv.status", digest, "", "", 1, 0, 1, "{\"a\":\"\xff\"}"},
		{"inv.status", digest, "", "", 1, 0, 1, `{"a":{"b":{"c":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}}`},
		{"inv.status", digest, "", "", 1, 0, 1, `{"shipment_id":"s","shipment_id":"t"}`},
		{"inv.status", digest, "", "", 1, 0, 1, `{"n":1e400}`},
		{"inv.status", digest, "", "", 1, 0, 1, `{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`},
		{"inv.status", digest, "", "", 1, 0, 1, `{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`},
		{"inv.status", digest, "", "", 1, 0, 1, `{"n":1e-400,"m":-0,"k":1E2}`},
		{"", "", "", "", 0, -1, 0, ``},
		{"inv.", "sha256:", ".", " ", -5, 1 << 62, 9, `[]`},
		{"inv.status", digest[:len(digest)-1] + "G", "T-A.readers", "", 1, 0, 1, `{}`},
	} {
		f.Add(uint64(7), c.tool, c.digest, c.class, c.run, c.gen, c.epoch, c.mode, []byte(c.args))
	}
	d := admissiontest.NewDecider()
	f.Fuzz(func(t *testing.T, seed uint64, tool, digest, class, run string, gen, epoch int64, mode int32, args []byte) {
		now := time.Now()
		g := newGen(seed, now)
		s := g.state()
		q := g.request(s) // the principal
		q.ToolID, q.Digest, q.Class, q.RunID, q.Generation, q.PlanEpoch, q.Mode, q.Arguments =
			tool, digest, class, run, gen, epoch, admissionv1.Mode(mode), args
		want := oracle.Decide(s, q)
		got, detail := d.Decide(worldOf(s), now, principal.Principal{Subject: q.Subject, Tenant: q.Tenant, Groups: q.Groups}, checkRequest(q))
		if got != want {
			t.Fatalf("admission %v (%q), oracle %v\n  %s", got, detail, want, describe(q))
		}
		if len(detail) > 512 {
			t.Fatalf("detail of %d bytes: caller input echoed unbounded?", len(detail))
		}
	})
}
