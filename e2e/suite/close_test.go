package suite

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// TestClosePointerClosesTheServer: the server's owner closes its pointer
// through DiscoveryService.ClosePointer with its own token; with no other
// call, admission answers SERVER_CLOSED for the tool and the lease service
// refuses to issue on the ALLOW it gave before the close (ISSUANCE_FROZEN,
// or the receipt's generation no longer current), as after a rollback
// that closes.
func TestClosePointerClosesTheServer(t *testing.T) {
	// Decisions live 5 s: the receipts from before the close must outlive
	// the lease replica's freeze (CI under load once took longer than the
	// 1 s they had).
	w := leaseworld.Start(t, 5*time.Second)
	ctx := ctxFor(t)
	// ALLOW receipts from before the close; until the lease replica sees
	// the close one may still be issued on (and used up), so a poll whose
	// Issue succeeded presents the next; a refused one (the close seen as a
	// stale generation before the freeze) leaves its receipt unused.
	var before []string
	for range 10 {
		before = append(before, w.Allow(t, 1).GetReceipt().GetReceiptId())
	}
	owner := discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, w.St.DiscoveryAddr, w.St.Auth.User(t, "olga", tenant, "inventory-team")))
	cl, err := owner.ClosePointer(ctx, &discoveryv1.ClosePointerRequest{ServerId: serverID, AudienceClass: class,
		ExpectedGeneration: 1, Reason: "the upstream misbehaves"})
	if err != nil || cl.GetPointer().GetState() != discoveryv1.PointerState_POINTER_STATE_CLOSED {
		t.Fatalf("ClosePointer by the owner: %v %v", cl, err)
	}
	var last catalogv1.DecisionReason
	servicetest.Eventually(t, 30*time.Second, "SERVER_CLOSED from admission", func() bool {
		last = w.Check(t, "alice", 1, leaseworld.ShipmentArgs).GetReason()
		return last == catalogv1.DecisionReason_DECISION_REASON_SERVER_CLOSED
	})
	next := 0
	servicetest.Eventually(t, 30*time.Second, "issuance frozen for the closed server", func() bool {
		if next == len(before) {
			t.Fatal("every receipt from before the close was used up before the freeze was seen")
		}
		_, err := w.Issue(t, "alice", before[next])
		c, r := leaseworld.CodeReason(err)
		switch {
		case err == nil:
			next++
		case r == "DECISION_EXPIRED":
			t.Fatalf("the receipts from before the close expired before the freeze was seen")
		}
		return c == codes.FailedPrecondition && r == "ISSUANCE_FROZEN"
	})
	next++
	for _, id := range before[next:min(next+3, len(before))] {
		_, err := w.Issue(t, "alice", id)
		wantRefusal(t, "Issue after the freeze was seen", err, codes.FailedPrecondition, "ISSUANCE_FROZEN")
	}
}
