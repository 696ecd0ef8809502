package registry_test

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

func present(want bool) func(*registryv1.Tool) bool {
	return func(t *registryv1.Tool) bool { return t.GetPresentAtSource() == want }
}

// What discovery commits is mirrored: a tool no longer listed is absent at
// the source and comes back when listed again; a closed pointer leaves the
// tools alone; a snapshot whose digests do not match its raw JSON is never
// applied; a generation discovery no longer keeps is replaced by the
// active one.
func TestIntakeFollowsDiscovery(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{})
	setup(t, r)
	d := r.Discovery
	a, b := registrytest.Tool(server, "a", "tool a"), registrytest.Tool(server, "b", "tool b")
	d.Commit(server, class, a, b)
	r.WaitTool(t, "logistics.b", present(true))

	d.Commit(server, class, a)
	r.WaitTool(t, "logistics.b", present(false))
	d.Commit(server, class, a, b)
	r.WaitTool(t, "logistics.b", present(true))
	_, history := getTool(t, r.Admin(t), "logistics.b")
	if got := kinds(history); !slices.Equal(got, []string{"DISCOVERED", "REMOVED_AT_SOURCE", "RESTORED_AT_SOURCE"}) {
		t.Fatalf("history of b: %v", got)
	}

	d.Close(server, class)
	bogus := registrytest.Tool(server, "c", "tool c")
	bogus.DescriptorDigest = registrytest.Tool(server, "c", "something else").GetDescriptorDigest()
	d.Commit(server, class, a, b, bogus)
	good := registrytest.Tool(server, "d", "tool d")
	d.Commit(server, class, a, b, good)
	r.WaitTool(t, "logistics.d", present(true))
	if _, err := r.Admin(t).GetTool(ctxT(t), &registryv1.GetToolRequest{ToolId: "logistics.c"}); err == nil {
		t.Fatal("a tool from an inconsistent snapshot was recorded")
	}
	if tool, _ := getTool(t, r.Admin(t), "logistics.a"); !tool.GetPresentAtSource() {
		t.Fatal("the closed pointer removed tools")
	}

	// Generation 6 is gone by the time the registry reads it: it applies
	// the active generation (7) instead, once.
	d.Pause()
	e, f := registrytest.Tool(server, "e", "tool e"), registrytest.Tool(server, "f", "tool f")
	gen6, _ := d.Commit(server, class, a, e)
	d.Commit(server, class, a, e, f)
	d.Forget(server, class, gen6)
	d.Resume()
	r.WaitTool(t, "logistics.f", present(true))
	_, history = getTool(t, r.Admin(t), "logistics.e")
	if got := kinds(history); !slices.Equal(got, []string{"DISCOVERED"}) {
		t.Fatalf("history of e: %v", got)
	}
}

// After a disconnect the registry resumes from the revision it stored, and
// when discovery no longer keeps that revision it re-reads every active
// pointer, then watches from the oldest kept move: the moves it missed
// while away are reflected by the re-read, later ones are applied, none
// twice.
func TestIntakeResumesAndResyncsAfterCompaction(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{})
	setup(t, r)
	d := r.Discovery
	digest := func(want string) func(*registryv1.Tool) bool {
		return func(t *registryv1.Tool) bool { return t.GetDescriptorDigest() == want }
	}
	v1 := shipmentStatus("v1")
	_, rev1 := d.Commit(server, class, v1)
	r.WaitTool(t, toolID, digest(v1.GetDescriptorDigest()))

	d.Disconnect()
	v2 := shipmentStatus("v2")
	d.Commit(server, class, v2)
	r.WaitTool(t, toolID, digest(v2.GetDescriptorDigest()))
	if w := d.Watches(); len(w) < 2 || w[1] < rev1 {
		t.Fatalf("after a disconnect the registry watched from %v, want from at least %d", w, rev1)
	}

	// The registry falls behind and discovery compacts past it.
	d.Pause()
	_, rev3 := d.Commit(server, class, shipmentStatus("v3 (never seen)"))
	v4 := shipmentStatus("v4")
	d.Commit(server, class, v4)
	d.Compact(rev3)
	d.Disconnect()
	d.Resume()
	r.WaitTool(t, toolID, digest(v4.GetDescriptorDigest()))
	v5 := shipmentStatus("v5")
	d.Commit(server, class, v5)
	r.WaitTool(t, toolID, digest(v5.GetDescriptorDigest()))

	_, history := getTool(t, r.Admin(t), toolID)
	if got := kinds(history); !slices.Equal(got, []string{"DISCOVERED", "DESCRIPTOR_CHANGED", "DESCRIPTOR_CHANGED", "DESCRIPTOR_CHANGED"}) {
		t.Fatalf("history %v: want v1, v2, v4, v5 each once", got)
	}
	w := d.Watches()
	if !slices.Contains(w, 0) {
		t.Fatalf("watches %v: no watch from 0 after the re-read", w)
	}
	time.Sleep(200 * time.Millisecond) // a few heartbeats
	if last := d.Watches(); len(last) != len(w) {
		t.Fatalf("the registry kept reconnecting: %v", last)
	}
}

// The intake keeps one variant per audience class: what class B's pointer
// moves do (a new descriptor, the tool dropped, the tool listed again)
// changes B's variant only, while A's variant, its review state and its
// presence stay as they were; the tool is absent at the source only when
// no class lists it. After a compaction the re-read of every pointer keeps
// both variants as they are.
func TestIntakeKeepsEachAudienceClassItsOwnVariant(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{})
	setupTwoTenants(t, r)
	ctx, admin, d := ctxT(t), r.Admin(t), r.Discovery
	va, vb := shipmentStatus("a"), shipmentStatus("b")
	d.Commit(server, class, va)
	d.Commit(server, classB, vb)
	tool := waitVariant(t, r, classB, vb.GetDescriptorDigest())
	pub, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(toolID)})
	if err != nil {
		t.Fatal(err)
	}
	app, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: variantOf(t, pub.GetTool(), class).GetApprovalDigest()})
	if err != nil {
		t.Fatal(err)
	}
	a := variantOf(t, app.GetTool(), class)
	if a.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED || variantOf(t, app.GetTool(), classB).GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("after approving A: %v", app.GetTool().GetVariants())
	}
	unchangedA := func(step string, tool *registryv1.Tool) {
		t.Helper()
		if got := variantOf(t, tool, class); !proto.Equal(got, a) {
			t.Fatalf("%s changed class A's variant:\nbefore %v\nafter  %v", step, a, got)
		}
	}

	// B drops the tool: B's variant is absent, the tool is still present.
	d.Commit(server, classB, registrytest.Tool(server, "other", "other"))
	tool = r.WaitTool(t, toolID, func(tl *registryv1.Tool) bool { return !variantOfOK(tl, classB).GetPresentAtSource() })
	unchangedA("class B dropping the tool", tool)
	if !tool.GetPresentAtSource() || tool.GetDescriptorDigest() != va.GetDescriptorDigest() {
		t.Fatalf("the tool is listed by A but shows %v", tool)
	}
	// B lists it again with a third descriptor.
	vb2 := shipmentStatus("b2")
	d.Commit(server, classB, vb2)
	tool = waitVariant(t, r, classB, vb2.GetDescriptorDigest())
	unchangedA("class B listing a new descriptor", tool)
	if b := variantOf(t, tool, classB); !b.GetPresentAtSource() || b.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("B back with a new descriptor: %v", b)
	}
	// The registry falls behind, discovery compacts past it, the registry
	// re-reads every pointer.
	d.Pause()
	_, rev := d.Commit(server, classB, vb2, registrytest.Tool(server, "late", "late"))
	d.Compact(rev)
	d.Disconnect()
	d.Resume()
	r.WaitTool(t, "logistics.late", present(true))
	tool, history := getTool(t, admin, toolID)
	unchangedA("the re-read after compaction", tool)
	var classA []string
	for _, h := range history {
		if h.GetAudienceClass() == class {
			classA = append(classA, h.GetKind())
		}
	}
	if !slices.Equal(classA, []string{"DISCOVERED"}) {
		t.Fatalf("class A's source history %v: only its own discovery", classA)
	}
	// A drops it too: A's variant is absent and keeps its approval on
	// record; B still lists it, so the tool is present, at B's descriptor.
	d.Commit(server, class)
	tool = r.WaitTool(t, toolID, func(tl *registryv1.Tool) bool { return !variantOfOK(tl, class).GetPresentAtSource() })
	if got := variantOf(t, tool, class); got.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED ||
		got.GetDescriptorDigest() != va.GetDescriptorDigest() {
		t.Fatalf("A dropped the tool: %v", got)
	}
	if !tool.GetPresentAtSource() || tool.GetDescriptorDigest() != vb2.GetDescriptorDigest() {
		t.Fatalf("B still lists the tool: %v", tool)
	}
	// Now nobody lists it.
	d.Commit(server, classB)
	r.WaitTool(t, toolID, present(false))
}

// variantOfOK is variantOf for polling: nil when there is none.
func variantOfOK(tool *registryv1.Tool, class string) *registryv1.ToolVariant {
	for _, v := range tool.GetVariants() {
		if v.GetAudienceClass() == class {
			return v
		}
	}
	return nil
}
