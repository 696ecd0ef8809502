package registry_test

import (
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// A tenant's Watch carries its tenant record, classes and policy epochs and
// the servers and tools its classes cover, and nothing of another tenant:
// tenant-b's server, class, epoch and discovered tool never reach a
// tenant-a token, while an admin sees both; tenant-a's heartbeats still
// reach the head past tenant-b's changes.
func TestWatchTenantSeesOnlyItsServersAndTools(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{})
	setup(t, r)
	ctx, admin := ctxT(t), r.Admin(t)
	payroll := logisticsServer()
	payroll.ServerId, payroll.DisplayName = "payroll", "Payroll"
	payroll.Transport = &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: "https://payroll.example.test/mcp"}}
	if _, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: payroll}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: "tenant-b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: "tenant-b.readers", TenantId: "tenant-b", Servers: []*registryv1.AudienceServer{{ServerId: "payroll", SecretRef: "env:TOOLCRIB_SECRET_PAYROLL"}},
	}}); err != nil {
		t.Fatal(err)
	}
	r.Discovery.Commit(server, class, shipmentStatus("v1"))
	r.Discovery.Commit("payroll", "tenant-b.readers", registrytest.Tool("payroll", "salaries", "every salary"))
	r.WaitTool(t, toolID, present(true))
	r.WaitTool(t, "payroll.salaries", present(true))
	// Something of tenant-b's is the newest change.
	if _, err := admin.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: "tenant-b", DisplayName: "B"}}); err != nil {
		t.Fatal(err)
	}
	list, err := admin.ListServers(ctx, &registryv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	head := list.GetRevision()

	a := watch(t, r.Client(t, r.Auth.User(t, "alice", tenant)), 0)
	var got []*registryv1.Change
	for beat := int64(0); beat < head; {
		select {
		case ch := <-a.changes:
			got = append(got, ch)
		case beat = <-a.beats:
		case err := <-a.done:
			t.Fatalf("tenant-a's stream ended: %v", err)
		}
	}
	// The changes before the last heartbeat are in the channel already.
	for drained := false; !drained; {
		select {
		case ch := <-a.changes:
			got = append(got, ch)
		default:
			drained = true
		}
	}
	sawTool := false
	for _, ch := range got {
		var owner string
		switch o := ch.GetObject().(type) {
		case *registryv1.Change_Tenant:
			owner = o.Tenant.GetTenantId()
		case *registryv1.Change_AudienceClass:
			owner = o.AudienceClass.GetTenantId()
		case *registryv1.Change_Policy:
			owner = o.Policy.GetTenantId()
		case *registryv1.Change_Server:
			owner = map[string]string{server: tenant}[o.Server.GetServerId()]
		case *registryv1.Change_Tool:
			owner = map[string]string{server: tenant}[o.Tool.GetServerId()]
			sawTool = sawTool || o.Tool.GetToolId() == toolID
		}
		if owner != tenant || strings.Contains(ch.String(), "payroll") || strings.Contains(ch.String(), "tenant-b") {
			t.Fatalf("tenant-a's stream carried revision %d: %v", ch.GetRevision(), ch)
		}
	}
	if !sawTool {
		t.Fatalf("tenant-a's stream (%d changes) lacks its own tool %s", len(got), toolID)
	}

	all := watch(t, admin, 0)
	for {
		ch := all.next(t, 1)[0]
		if ch.GetTool().GetToolId() == "payroll.salaries" {
			break
		}
	}
}

// Two tenants reading one server see different descriptors of one tool:
// the tool's changes reach both tenants' streams, but tenant-a's carry only
// tenant-a's variant — never tenant-b's descriptor text, class or approval —
// and no audience class change on a tenant's stream carries a secret
// reference.
func TestWatchToolChangesCarryOnlyTheViewersVariants(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{})
	setup(t, r)
	ctx, admin := ctxT(t), r.Admin(t)
	if _, err := admin.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: "tenant-b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: "tenant-b.readers", TenantId: "tenant-b", Servers: []*registryv1.AudienceServer{{ServerId: server, SecretRef: "env:TOOLCRIB_SECRET_TENANT_B"}},
	}}); err != nil {
		t.Fatal(err)
	}
	r.Discovery.Commit(server, class, shipmentStatus("v1"))
	r.Discovery.Commit(server, "tenant-b.readers", shipmentStatus("TENANT-B PRIVATE: internal warehouse lookup"))
	r.WaitTool(t, toolID, func(tl *registryv1.Tool) bool { return len(tl.GetVariants()) == 2 })
	list, err := admin.ListServers(ctx, &registryv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	head := list.GetRevision()

	a := watch(t, r.Client(t, r.Auth.User(t, "alice", tenant)), 0)
	var got []*registryv1.Change
	for beat := int64(0); beat < head; {
		select {
		case ch := <-a.changes:
			got = append(got, ch)
		case beat = <-a.beats:
		case err := <-a.done:
			t.Fatalf("tenant-a's stream ended: %v", err)
		}
	}
	// The changes sent before the last heartbeat are in the channel already.
	for drained := false; !drained; {
		select {
		case ch := <-a.changes:
			got = append(got, ch)
		default:
			drained = true
		}
	}
	var tools int
	for _, ch := range got {
		{
			text := ch.String()
			if strings.Contains(text, "TENANT-B") || strings.Contains(text, "tenant-b") || strings.Contains(text, "TOOLCRIB_SECRET") {
				t.Fatalf("tenant-a's stream carried another tenant's variant or a secret reference at revision %d: %v", ch.GetRevision(), ch)
			}
			if tl := ch.GetTool(); tl != nil {
				tools++
				for _, v := range tl.GetVariants() {
					if v.GetTenantId() != tenant {
						t.Fatalf("variant of %s on tenant-a's stream", v.GetTenantId())
					}
				}
			}
		}
	}
	if tools == 0 {
		t.Fatal("tenant-a's stream carried no change of its own tool")
	}
}
