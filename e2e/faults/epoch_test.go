package faults_test

import (
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/registry"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"
)

// TestPolicyEpochBumpDuringScanRefusesTheCAS runs discovery against the
// real registry (its Run, own database). The fixture holds the scan in the
// middle of pagination; meanwhile an admin revokes a grant, which bumps the
// tenant's policy epoch in the same transaction (I8). Released, the crawl
// proves the whole catalog (the oracle agrees), but the commit re-reads
// the epoch and the CAS refuses: INCOMPLETE POLICY_EPOCH_CHANGED, nothing
// activated (I1). The retry scans at the new epoch and commits a snapshot
// bound to it.
func TestPolicyEpochBumpDuringScanRefusesTheCAS(t *testing.T) {
	t.Parallel()
	// The fixture listens on loopback; its secret is FAULTS_UPSTREAM.
	reg := registrytest.Start(t, registrytest.Options{NoDiscovery: true, Configure: func(c *registry.Config) {
		c.Egress.AllowLoopback = true
		c.Secrets.EnvPrefixes = "FAULTS_"
	}})
	admin := reg.Admin(t)
	ctx := ctxT(t)
	const server = "inventory"

	s := startFixture(t, fixture.Script{Versioned: true, PageSize: 2, Tools: tools("inv", 6),
		Steps: []fixture.Step{{Request: 2, Block: true}}})
	ep := serveHTTP(t, s, fixture.HTTPOptions{})
	if _, err := admin.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tenant}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: server, Owner: tenant + "/group:inventory-owners", TrustLevel: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: serverProvided, Transport: overHTTP(ep.URL).GetTransport().(*registryv1.Server_StreamableHttp),
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: class, TenantId: tenant, Servers: []*registryv1.AudienceServer{{ServerId: server, SecretRef: "env:FAULTS_UPSTREAM"}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Group: "readers",
		Scopes: []string{"inventory:read"}, AudienceClasses: []string{class}}); err != nil {
		t.Fatal(err)
	}
	e := startDiscovery(t, envOptions{auth: reg.Auth, registryAddr: reg.Addr})

	id := e.scan(server, class)
	select {
	case <-s.Blocked(2):
	case <-time.After(30 * time.Second):
		t.Fatal("the scan never reached page 2")
	}
	policy, err := admin.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant})
	if err != nil {
		t.Fatal(err)
	}
	atStart := policy.GetPolicy().GetPolicyEpoch()
	revoked, err := admin.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenant, Group: "readers", Scopes: []string{"inventory:read"}})
	if err != nil {
		t.Fatal(err)
	}
	if revoked.GetPolicyEpoch() != atStart+1 {
		t.Fatalf("revocation moved the epoch from %d to %d, want +1", atStart, revoked.GetPolicyEpoch())
	}
	s.Release(2)

	first := e.wait(id, attempt(1))
	want(t, first, incomplete, discoveryv1.RunReason_RUN_REASON_POLICY_EPOCH_CHANGED)
	if first.GetGeneration() != 0 || first.GetPolicyEpoch() != atStart {
		t.Fatalf("refused run: generation %d, epoch %d; want none, and the epoch at scan start %d", first.GetGeneration(), first.GetPolicyEpoch(), atStart)
	}
	scans := scanLogs(s.Log().Events())
	if out := judge(t, scans[0], serverProvided); out.State != proven {
		t.Fatalf("the oracle says the refused scan's crawl was %s: the refusal must be the CAS's, not the crawl's", out)
	}

	final := e.wait(id, nil)
	want(t, final, eligible, noReason)
	e.onlyGenerationsFrom(server, class, final)
	snap := e.checkWhole(t, server, class, s.Log().Events())
	if snap.GetPolicyEpoch() != revoked.GetPolicyEpoch() || final.GetPolicyEpoch() != revoked.GetPolicyEpoch() {
		t.Fatalf("the retry committed at epoch %d (run %d), want the epoch after the revocation, %d", snap.GetPolicyEpoch(), final.GetPolicyEpoch(), revoked.GetPolicyEpoch())
	}
	agrees(t, final, judge(t, scanLogs(s.Log().Events())[1], serverProvided))
}
