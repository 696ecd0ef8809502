package admission

import (
	"context"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/faultreport"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
)

// startDiscovery runs another discovery process of the world (same
// database and registry), as a restart on another address would.
func (w *world) startDiscovery(t *testing.T) string {
	t.Helper()
	cfg, err := discovery.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.RegistryAddr = w.st.RegistryAddr
	cfg.Egress.AllowLoopback = true
	cfg.Linger, cfg.WatchHeartbeat = 0, heartbeat
	return servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Common = w.st.Auth.Common(t, w.st.PostgresURL, false, listening)
		return discovery.Run(ctx, c)
	})
}

// TestReplicaResumesAfterRestartWithoutGap: a replica loses both Watch
// streams — its registry link is cut and its discovery process goes away,
// to come back as another process on another address (the replica's link
// re-targeted there). While it is cut off, the tenant's policy moves twice
// (a grant to another group, then alice's scope revoked) and a scan
// commits generation 2. The replica allows nothing once its validity
// window has passed (STALE_POLICY), and when the streams are back its
// first answer that is not STALE_POLICY already reflects every change made
// meanwhile: POLICY_REVOKED at the newest epoch and generation 2 — no
// ALLOW from the view it had before, no change skipped.
func TestReplicaResumesAfterRestartWithoutGap(t *testing.T) {
	ctx := ctxFor(t)
	w := newWorld(t)
	const window = time.Second
	rep := w.startReplica(t, window)
	alice := w.client(t, rep, "alice", tenantA)
	epoch := w.epoch(t)
	w.requireAllow(t, ctx, alice, epoch)
	second := w.startDiscovery(t)

	cut := time.Now()
	rep.regLink.Sever()
	rep.discLink.Sever()
	if _, err := w.st.Registry.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantA, Group: "auditors",
		Scopes: []string{scope}, AudienceClasses: []string{classA}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.srv.Apply(fixture.Upsert(extraTool{name: "label", description: "Print a label.", scope: scope}.raw())); err != nil {
		t.Fatal(err)
	}
	w.scan(t, w.generation+1)
	rv, err := w.st.Registry.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenantA, Subject: "alice", Scopes: []string{scope}})
	if err != nil {
		t.Fatal(err)
	}
	pastWindow := 0
	defer func() { faultreport.Add(t, faultreport.AdmissionAllowAfterWindow, int64(pastWindow)) }()
	for time.Since(cut) < window+500*time.Millisecond {
		resp, err := w.check(ctx, alice, epoch, "")
		if err != nil {
			t.Fatal(err)
		}
		if at := resp.GetReceipt().GetDecidedAt().AsTime(); resp.GetReason() == allow && at.Sub(cut) > window {
			pastWindow++
			t.Fatalf("ALLOW %v after the streams were cut (window %v)", at.Sub(cut), window)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if resp, err := w.check(ctx, alice, epoch, ""); err != nil || resp.GetReason() != stalePolicy {
		t.Fatalf("cut off past the window: %v %v", resp.GetReason(), err)
	}

	rep.discLink.Retarget(second)
	rep.discLink.Heal()
	rep.regLink.Heal()
	healed := time.Now()
	for deadline := healed.Add(6 * window); ; time.Sleep(10 * time.Millisecond) {
		resp, err := w.check(ctx, alice, epoch, "")
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetReason() == stalePolicy {
			if time.Now().After(deadline) {
				t.Fatal("still STALE_POLICY after healing")
			}
			continue
		}
		if resp.GetReason() != policyRevoked || resp.GetCurrentPolicyEpoch() != rv.GetPolicyEpoch() || resp.GetCurrentGeneration() != w.generation+1 {
			t.Fatalf("first answer after resuming: %v %q at epoch %d generation %d; want POLICY_REVOKED at %d/%d",
				resp.GetReason(), resp.GetDetail(), resp.GetCurrentPolicyEpoch(), resp.GetCurrentGeneration(), rv.GetPolicyEpoch(), w.generation+1)
		}
		t.Logf("caught up %.0f ms after the links healed (discovery on another process)", float64(time.Since(healed).Microseconds())/1000)
		break
	}
	servicetest.WaitServing(t, rep.addr, 5*time.Second)
}
