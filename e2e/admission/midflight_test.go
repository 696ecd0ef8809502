package admission

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	"github.com/toolcrib/toolcrib/e2e/stack"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/faultreport"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/discovery"
)

// policyChangeAfter returns when the first change of the registry's log
// that moved tenant past epoch committed, and the epoch it moved to.
func policyChangeAfter(t *testing.T, st *stack.Stack, tenant string, epoch int64) (time.Time, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := st.Registry.Watch(ctx, &registryv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := s.Recv()
		if err != nil {
			t.Fatalf("no change of %s past epoch %d: %v", tenant, epoch, err)
		}
		if p := msg.GetChange().GetPolicy(); p.GetTenantId() == tenant && p.GetPolicyEpoch() > epoch {
			return msg.GetChange().GetCommittedAt().AsTime(), p.GetPolicyEpoch()
		}
		if msg.GetHeartbeat() != nil {
			t.Fatalf("the registry's log has no change of %s past epoch %d", tenant, epoch)
		}
	}
}

// flight is what one party saw during a mid-flight change.
type flight struct {
	name        string
	calls       int
	lastOK      time.Time // last ALLOW (decided_at) or last valid Verify (answer received)
	firstDenied string
	okAfterDeny bool
	err         error
}

func (f *flight) saw(ok bool, at time.Time, why string) {
	f.calls++
	if ok {
		f.lastOK = at
		if f.firstDenied != "" {
			f.okAfterDeny = true
		}
	} else if f.firstDenied == "" {
		f.firstDenied = why
	}
}

// TestChangesWhileTwoReplicasAndALeaseHolderAreMidFlight: for each of a
// revoked grant, a disabled tool, a new descriptor not yet approved, a
// rollback and a close, two admission replicas answer Checks
// continuously and a lease holder loops Check → Issue → Verify while the
// change commits. Per replica and for the lease holder the test records
// the last ALLOW and the last successful Verify relative to the commit
// (the registry's committed_at, or the pointer's moved_at), prints the
// table, and requires each within 1 s, no success after a denial, and a
// denial in the end. ALLOWs or Verifies past the bound are counted as
// allow_after_revoke_bound.
func TestChangesWhileTwoReplicasAndALeaseHolderAreMidFlight(t *testing.T) {
	var table []string
	past := 0
	defer func() {
		faultreport.Add(t, faultreport.AdmissionAllowAfterRevokeBound, int64(past))
		t.Logf("last success after the commit (negative: before it)\n%-12s %-18s %7s %12s  %s\n%s", "change", "party", "calls", "last ok", "first denial",
			strings.Join(table, "\n"))
	}()
	for _, change := range []string{"revoke", "disable", "unapprove", "rollback", "close"} {
		t.Run(change, func(t *testing.T) {
			rows, n := midFlight(t, change)
			table = append(table, rows...)
			past += n
		})
	}
}

func midFlight(t *testing.T, change string) ([]string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := leaseworld.StartWith(t, leaseworld.Options{CacheTTL: time.Minute, Heartbeat: heartbeat})
	key := discovery.PointerKey{ServerID: leaseworld.ServerID, AudienceClass: leaseworld.Class}
	gen := int64(1)
	if change == "rollback" { // a second generation to roll back from
		if _, err := w.Srv.Apply(fixture.Upsert(leaseworld.Reserve())); err != nil {
			t.Fatal(err)
		}
		if _, err := w.St.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: leaseworld.ServerID, AudienceClass: leaseworld.Class}); err != nil {
			t.Fatal(err)
		}
		if _, err := discovery.WaitPointers(ctx, w.St.Discovery, 0, []discovery.PointerKey{key},
			func(p *discoveryv1.ActivePointer) bool { return p.GetGeneration() == 2 }); err != nil {
			t.Fatal(err)
		}
		gen = 2
	}
	tok := w.St.Auth.User(t, "alice", leaseworld.Tenant, "readers")
	adm := []admissionv1.AdmissionServiceClient{w.Adm["alice"],
		admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, w.StartAdmission(t), tok))}
	check := func(c admissionv1.AdmissionServiceClient) (*admissionv1.CheckResponse, error) {
		return c.Check(ctx, &admissionv1.CheckRequest{ToolId: leaseworld.ToolID, Generation: gen, DescriptorDigest: w.Digest,
			Arguments: leaseworld.ShipmentArgs, Mode: admissionv1.Mode_MODE_AUTONOMOUS, AudienceClass: leaseworld.Class})
	}
	for _, c := range adm {
		servicetest.Eventually(t, 30*time.Second, "both replicas allow", func() bool {
			resp, err := check(c)
			return err == nil && resp.GetReason() == allow
		})
	}
	argDigest, err := lease.ArgumentDigest(leaseworld.ShipmentArgs)
	if err != nil {
		t.Fatal(err)
	}
	parties := []*flight{{name: "admission 1"}, {name: "admission 2"}, {name: "lease holder"}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range adm {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := parties[i]
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := check(c)
				if err != nil {
					f.err = err
					return
				}
				f.saw(resp.GetReason() == allow, resp.GetReceipt().GetDecidedAt().AsTime(), resp.GetReason().String())
			}
		}()
	}
	wg.Add(1)
	go func() { // the lease holder: Check → Issue → Verify, again and again
		defer wg.Done()
		f := parties[2]
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := check(adm[0])
			if err != nil {
				f.err = err
				return
			}
			if resp.GetReason() != allow {
				f.saw(false, time.Now(), "Check "+resp.GetReason().String())
				continue
			}
			iss, err := w.Lease["alice"].Issue(ctx, &leasev1.IssueRequest{ReceiptId: resp.GetReceipt().GetReceiptId(),
				ArgumentDigest: argDigest, HolderPublicKey: w.JWK, Audience: leaseworld.Audience})
			if err != nil {
				_, reason := leaseworld.CodeReason(err)
				f.saw(false, time.Now(), "Issue "+reason)
				continue
			}
			cl := iss.GetClaims()
			proof, err := lease.NewProof(w.Holder, lease.Claims{ID: cl.GetLeaseId(), ArgumentDigest: cl.GetArgumentDigest(), Audience: cl.GetAudience()}, time.Now())
			if err != nil {
				f.err = err
				return
			}
			v, err := w.Lease["alice"].Verify(ctx, &leasev1.VerifyRequest{Token: iss.GetToken(), Proof: proof, Audience: cl.GetAudience(),
				ArgumentDigest: cl.GetArgumentDigest(), ToolId: leaseworld.ToolID})
			if err != nil {
				f.err = err
				return
			}
			f.saw(v.GetValid(), time.Now(), "Verify "+v.GetFailure().String())
		}
	}()
	time.Sleep(300 * time.Millisecond) // every party is succeeding

	var committed time.Time
	policy, err := w.St.Registry.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: leaseworld.Tenant})
	if err != nil {
		t.Fatal(err)
	}
	epoch := policy.GetPolicy().GetPolicyEpoch()
	switch change {
	case "revoke":
		_, err = w.St.Registry.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: leaseworld.Tenant, Group: "readers", Scopes: []string{"shipment:read"}})
	case "disable":
		_, err = w.St.Registry.DisableTool(ctx, &registryv1.DisableToolRequest{ToolId: leaseworld.ToolID, Reason: "incident"})
	case "unapprove": // a new descriptor at the source, not reviewed
		if _, err = w.Srv.Apply(fixture.Upsert(leaseworld.ShipmentStatus("Query and try to repair the status of a shipment."))); err == nil {
			_, err = w.St.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: leaseworld.ServerID, AudienceClass: leaseworld.Class})
		}
	case "rollback":
		_, err = w.St.Discovery.Rollback(ctx, &discoveryv1.RollbackRequest{ServerId: leaseworld.ServerID, AudienceClass: leaseworld.Class,
			ExpectedGeneration: 2, ToGeneration: 1, Reason: "bad release"})
	case "close": // no older fresh generation: the pointer closes
		_, err = w.St.Discovery.Rollback(ctx, &discoveryv1.RollbackRequest{ServerId: leaseworld.ServerID, AudienceClass: leaseworld.Class,
			ExpectedGeneration: 1, Reason: "compromised"})
	}
	if err != nil {
		t.Fatalf("%s: %v", change, err)
	}
	switch change {
	case "revoke", "disable":
		committed, _ = policyChangeAfter(t, w.St, leaseworld.Tenant, epoch)
	default:
		moved, err := discovery.WaitPointers(ctx, w.St.Discovery, 0, []discovery.PointerKey{key}, func(p *discoveryv1.ActivePointer) bool {
			switch change {
			case "unapprove":
				return p.GetGeneration() == 2
			case "rollback":
				return p.GetGeneration() == 1 && p.GetRevision() > 2
			}
			return p.GetState() == discoveryv1.PointerState_POINTER_STATE_CLOSED
		})
		if err != nil {
			t.Fatal(err)
		}
		committed = moved[key].GetMovedAt().AsTime()
	}
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()

	var rows []string
	past := 0
	for _, f := range parties {
		if f.err != nil {
			t.Fatalf("%s: %v", f.name, f.err)
		}
		lag := f.lastOK.Sub(committed)
		rows = append(rows, fmt.Sprintf("%-12s %-18s %7d %9.1f ms  %s", change, f.name, f.calls, float64(lag.Microseconds())/1000, f.firstDenied))
		if lag > time.Second {
			past++
			t.Errorf("%s: last success %v after the %s committed", f.name, lag, change)
		}
		if f.firstDenied == "" || f.okAfterDeny {
			t.Errorf("%s: first denial %q, a success after a denial %v", f.name, f.firstDenied, f.okAfterDeny)
		}
	}
	return rows, past
}
