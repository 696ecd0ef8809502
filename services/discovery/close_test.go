package discovery_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// TestClosePointer: the server's owner closes the pointer by CAS, as a
// rollback that finds nothing fresh would (a CLOSE move on the Watch
// stream, the reason in the receipt row, no snapshot served). Bad input is
// INVALID_ARGUMENT naming the field; a tenant-b principal gets the same
// NOT_FOUND as for a server that does not exist; a tenant-a member who
// does not own the server is PERMISSION_DENIED; a stale expectation is
// ABORTED POINTER_MOVED; none of these moves anything; closing again is
// POINTER_CLOSED.
func TestClosePointer(t *testing.T) {
	e, _ := shadowEnv(t, discoverytest.Tools("x", 2)...)
	ctx := ctxT(t)
	want(t, e.scanAndWait("inventory", class), eligible, 0)
	stream, err := e.admin.Watch(ctx, &discoveryv1.WatchRequest{FromRevision: 1})
	if err != nil {
		t.Fatal(err)
	}
	owner := e.client(e.auth.User(t, "olga", tenant, "inventory-team"))
	member := e.client(e.auth.User(t, "mia", tenant, "readers"))
	bob := e.client(e.auth.User(t, "bob", "tenant-b", "inventory-team", "readers"))
	req := func(edit func(*discoveryv1.ClosePointerRequest)) *discoveryv1.ClosePointerRequest {
		q := &discoveryv1.ClosePointerRequest{ServerId: "inventory", AudienceClass: class, ExpectedGeneration: 1, Reason: "the vendor's key leaked"}
		if edit != nil {
			edit(q)
		}
		return q
	}

	for name, tc := range map[string]struct {
		field string
		edit  func(*discoveryv1.ClosePointerRequest)
	}{
		"no reason":           {"reason", func(q *discoveryv1.ClosePointerRequest) { q.Reason = "" }},
		"a megabyte reason":   {"reason", func(q *discoveryv1.ClosePointerRequest) { q.Reason = strings.Repeat("r", 1<<20) }},
		"a control character": {"reason", func(q *discoveryv1.ClosePointerRequest) { q.Reason = "a\x00b" }},
		"no generation":       {"expected_generation", func(q *discoveryv1.ClosePointerRequest) { q.ExpectedGeneration = 0 }},
		"a megabyte server":   {"server_id", func(q *discoveryv1.ClosePointerRequest) { q.ServerId = strings.Repeat("s", 1<<20) }},
		"no class":            {"audience_class", func(q *discoveryv1.ClosePointerRequest) { q.AudienceClass = "" }},
	} {
		_, err := owner.ClosePointer(ctx, req(tc.edit))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.field) || len(err.Error()) > 4096 {
			t.Errorf("%s: %v, want a short INVALID_ARGUMENT on %s", name, err, tc.field)
		}
	}

	_, theirs := bob.ClosePointer(ctx, req(nil))
	_, none := bob.ClosePointer(ctx, req(func(q *discoveryv1.ClosePointerRequest) { q.ServerId = "nosuch" }))
	if a, b := observe(t, nil, theirs), observe(t, nil, none); a.code != codes.NotFound || !a.equal(b) {
		t.Fatalf("tenant-b closing tenant-a's pointer: %v, for a server that does not exist: %v", theirs, none)
	}
	if _, err := member.ClosePointer(ctx, req(nil)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a member who does not own the server: %v", err)
	}
	if _, err := owner.ClosePointer(ctx, req(func(q *discoveryv1.ClosePointerRequest) { q.ExpectedGeneration = 2 })); status.Code(err) != codes.Aborted || reason(err) != "POINTER_MOVED" {
		t.Fatalf("a stale expectation: %v", err)
	}
	if got := e.active("inventory", class); got.GetPointer().GetState() != discoveryv1.PointerState_POINTER_STATE_ACTIVE || got.GetSnapshot().GetGeneration() != 1 {
		t.Fatalf("refused closes moved the pointer: %v", got.GetPointer())
	}

	cl, err := owner.ClosePointer(ctx, req(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cl.GetPointer().GetState() != discoveryv1.PointerState_POINTER_STATE_CLOSED || cl.GetPointer().GetGeneration() != 1 ||
		cl.GetReceipt().GetMove() != catalogv1.PointerMove_POINTER_MOVE_CLOSE || cl.GetReceipt().GetPreviousGeneration() != 1 {
		t.Fatalf("close: %v", cl)
	}
	if got := e.active("inventory", class); got.GetSnapshot() != nil || got.GetPointer().GetState() != discoveryv1.PointerState_POINTER_STATE_CLOSED {
		t.Fatalf("a closed pointer served a snapshot: %v", got)
	}
	changes, _ := watchChanges(t, stream, 1) // after revision 1 (the scan's activation)
	if last := changes[0]; last.GetRevision() != 2 || last.GetReceipt().GetMove() != catalogv1.PointerMove_POINTER_MOVE_CLOSE ||
		last.GetReceipt().GetReceiptId() != cl.GetReceipt().GetReceiptId() || last.GetPointer().GetState() != discoveryv1.PointerState_POINTER_STATE_CLOSED {
		t.Fatalf("the Watch stream's change: %v", last)
	}
	pool, err := pgxpool.New(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var move, why string
	if err := pool.QueryRow(ctx, "SELECT move, reason FROM discovery.receipts WHERE receipt_id = $1", cl.GetReceipt().GetReceiptId()).Scan(&move, &why); err != nil ||
		why != "the vendor's key leaked" || !strings.Contains(move, "CLOSE") {
		t.Fatalf("the receipt row: %q %q %v", move, why, err)
	}
	if _, err := owner.ClosePointer(ctx, req(nil)); status.Code(err) != codes.FailedPrecondition || reason(err) != "POINTER_CLOSED" {
		t.Fatalf("closing a closed pointer: %v", err)
	}
}
