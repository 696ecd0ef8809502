package registry_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// tenant-b's private class over the fixture's server, and its credential
// reference.
const (
	tenantB       = "tenant-b"
	privateClassB = "tenant-b.private"
	secretB       = "file:/run/secrets/tenant-b-logistics"
	secretA       = "env:LOGISTICS_TOKEN"
	adminGrp      = servicetest.AdminGroup
	serviceGr     = servicetest.ServiceGroup
)

func putTenantB(t *testing.T, admin registryv1.RegistryServiceClient) {
	t.Helper()
	ctx := ctxT(t)
	if _, err := admin.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tenantB}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: privateClassB, TenantId: tenantB, Description: "TENANT-B PRIVATE",
		Servers: []*registryv1.AudienceServer{{ServerId: server, SecretRef: secretB}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantB, Group: "warehouse",
		Scopes: []string{"warehouse:read"}, AudienceClasses: []string{privateClassB}}); err != nil {
		t.Fatal(err)
	}
}

// refusal is what a client can observe of an error: its code, message and
// details (decoded, so the order of map entries does not matter).
type refusal struct {
	code    codes.Code
	message string
	details []proto.Message
}

func refusalOf(t *testing.T, err error) refusal {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	st := status.Convert(err)
	r := refusal{code: st.Code(), message: st.Message()}
	for _, d := range st.Details() {
		m, ok := d.(proto.Message)
		if !ok {
			t.Fatalf("undecodable detail %v", d)
		}
		r.details = append(r.details, m)
	}
	return r
}

func (r refusal) equal(o refusal) bool {
	return r.code == o.code && r.message == o.message && slices.EqualFunc(r.details, o.details, proto.Equal)
}

// A tenant principal sees only its own tenant's audience classes and
// policy. Another tenant's class or policy is answered exactly as if it did
// not exist: the same status, byte for byte, before and after tenant-b
// creates it; a list filtered by tenant-b is empty, as before. Group names
// that mean "admin" or "service" in the platform tenant change nothing in
// tenant-a. Secret references reach only admins and services.
func TestAudienceClassesAndPolicyAreTenantScoped(t *testing.T) {
	t.Parallel()
	r, ctx, admin := startFixture(t)
	callers := map[string]registryv1.RegistryServiceClient{
		"tenant-a user":                 r.Client(t, r.Auth.User(t, "alice", tenant, "readers")),
		"tenant-a with platform groups": r.Client(t, r.Auth.User(t, "mallory", tenant, adminGrp, serviceGr)),
		"no tenant, platform groups":    r.Client(t, r.Auth.User(t, "nobody", "", adminGrp, serviceGr)),
	}
	type answers struct {
		getClass, getPolicy, getPolicyAt refusal
		list                             []*registryv1.AudienceClass
	}
	probe := func(c registryv1.RegistryServiceClient) answers {
		var a answers
		_, err := c.GetAudienceClass(ctx, &registryv1.GetAudienceClassRequest{Name: privateClassB})
		wantCode(t, err, codes.NotFound, "NOT_FOUND")
		a.getClass = refusalOf(t, err)
		_, err = c.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenantB})
		wantCode(t, err, codes.NotFound, "NOT_FOUND")
		a.getPolicy = refusalOf(t, err)
		_, err = c.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenantB, AtEpoch: 2})
		wantCode(t, err, codes.NotFound, "NOT_FOUND")
		a.getPolicyAt = refusalOf(t, err)
		list, err := c.ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{TenantId: tenantB})
		if err != nil {
			t.Fatalf("a list filtered by another tenant must be empty, not an error: %v", err)
		}
		a.list = list.GetAudienceClasses()
		return a
	}
	before := map[string]answers{}
	for name, c := range callers {
		before[name] = probe(c)
	}
	putTenantB(t, admin)
	for name, c := range callers {
		t.Run(name, func(t *testing.T) {
			after := probe(c)
			if !after.getClass.equal(before[name].getClass) || !after.getPolicy.equal(before[name].getPolicy) ||
				!after.getPolicyAt.equal(before[name].getPolicyAt) {
				t.Fatalf("tenant-b's class or policy is answered differently from a missing one:\n%v\n%v", after, before[name])
			}
			if len(after.list) != 0 || len(before[name].list) != 0 {
				t.Fatalf("listed tenant-b's classes: %v", after.list)
			}
			all, err := c.ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			byServer, err := c.ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{ServerId: server})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range append(all.GetAudienceClasses(), byServer.GetAudienceClasses()...) {
				if a.GetTenantId() != tenant {
					t.Fatalf("listed another tenant's class %v", a)
				}
			}
		})
	}

	// A tenant-a principal reads its own class and policy, without the
	// secret references.
	alice := callers["tenant-a user"]
	own, err := alice.GetAudienceClass(ctx, &registryv1.GetAudienceClassRequest{Name: class})
	if err != nil || len(own.GetAudienceClass().GetServers()) != 1 || own.GetAudienceClass().GetServers()[0].GetServerId() != server {
		t.Fatalf("own class: %v %v", own, err)
	}
	list, err := alice.ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{})
	if err != nil || len(list.GetAudienceClasses()) != 1 || list.GetAudienceClasses()[0].GetName() != class {
		t.Fatalf("own list: %v %v", list, err)
	}
	pol, err := alice.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant})
	if err != nil || len(pol.GetPolicy().GetAudienceClasses()) != 1 {
		t.Fatalf("own policy: %v %v", pol, err)
	}
	for _, a := range []*registryv1.AudienceClass{own.GetAudienceClass(), list.GetAudienceClasses()[0], pol.GetPolicy().GetAudienceClasses()[0]} {
		if ref := a.GetServers()[0].GetSecretRef(); ref != "" {
			t.Fatalf("a tenant user was given the secret reference %q", ref)
		}
	}
	l, err := callers["no tenant, platform groups"].ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{})
	if err != nil || len(l.GetAudienceClasses()) != 0 {
		t.Fatalf("a principal of no tenant listed classes: %v %v", l, err)
	}

	// Platform admins and services see every tenant, with the references.
	for name, c := range map[string]registryv1.RegistryServiceClient{"admin": admin, "service": r.Client(t, r.Auth.Service(t))} {
		b, err := c.GetAudienceClass(ctx, &registryv1.GetAudienceClassRequest{Name: privateClassB})
		if err != nil || b.GetAudienceClass().GetServers()[0].GetSecretRef() != secretB {
			t.Fatalf("%s: tenant-b's class %v %v", name, b, err)
		}
		l, err := c.ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{ServerId: server})
		if err != nil || len(l.GetAudienceClasses()) != 2 || l.GetAudienceClasses()[0].GetServers()[0].GetSecretRef() != secretA {
			t.Fatalf("%s: list %v %v", name, l, err)
		}
		p, err := c.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenantB})
		if err != nil || len(p.GetPolicy().GetGrants()) != 1 || p.GetPolicy().GetAudienceClasses()[0].GetServers()[0].GetSecretRef() != secretB {
			t.Fatalf("%s: tenant-b's policy %v %v", name, p, err)
		}
	}
}

// Roles are bound to where they come from. The owner of the fixture's
// server is tenant-a's logistics-platform group: a member of a group of the
// same name in tenant-b can do nothing to the tools and moves no epoch of
// tenant-a; a tenant-a token carrying the platform's admin or service group
// is neither; a bare group owner is refused with a field violation.
func TestRolesAreBoundToTheirTenant(t *testing.T) {
	t.Parallel()
	r, ctx, admin := startWithTool(t, "v1")
	putTenantB(t, admin)
	owner := r.Client(t, r.Auth.User(t, "lee", tenant, owners))
	impostors := map[string]registryv1.RegistryServiceClient{
		"tenant-b member of the owner group": r.Client(t, r.Auth.User(t, "lee", tenantB, owners)),
		"no tenant, owner group":             r.Client(t, r.Auth.User(t, "lee", "", owners)),
		"tenant-a with the admin group":      r.Client(t, r.Auth.User(t, "mallory", tenant, adminGrp)),
		"tenant-b with the admin group":      r.Client(t, r.Auth.User(t, "mallory", tenantB, adminGrp, serviceGr)),
	}
	pub, err := owner.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(toolID)})
	if err != nil {
		t.Fatalf("the tenant-a owner group may publish: %v", err)
	}
	digest := pub.GetTool().GetApprovalDigest()
	epochA := epochOf(t, admin, tenant)
	for name, c := range impostors {
		t.Run(name, func(t *testing.T) {
			// A principal outside tenant-a does not see tenant-a's tool at
			// all (NOT_FOUND, as for a missing id); a tenant-a principal
			// outside the owner group sees it and is refused.
			toolCode, toolReason := codes.NotFound, "NOT_FOUND"
			if strings.HasPrefix(name, "tenant-a") {
				toolCode, toolReason = codes.PermissionDenied, "PERMISSION_DENIED"
			}
			_, err := c.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(toolID)})
			wantCode(t, err, toolCode, toolReason)
			_, err = c.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: digest})
			wantCode(t, err, toolCode, toolReason)
			_, err = c.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: toolID})
			wantCode(t, err, toolCode, toolReason)
			_, err = c.DisableTool(ctx, &registryv1.DisableToolRequest{ToolId: toolID})
			wantCode(t, err, toolCode, toolReason)
			_, err = c.RollbackTool(ctx, &registryv1.RollbackToolRequest{ToolId: toolID})
			wantCode(t, err, toolCode, toolReason)
			// Admin-only and service-only calls.
			_, err = c.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Group: "x", Scopes: []string{"a"}})
			wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
			cur, err := admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: server})
			if err != nil {
				t.Fatal(err)
			}
			pinned := proto.Clone(cur.GetServer()).(*registryv1.Server)
			pinned.IdentityPin = "sha256:" + strings.Repeat("ab", 32)
			_, err = c.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: pinned, ExpectedVersion: cur.GetServer().GetVersion()})
			wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
			// Watch is open to tenant principals, filtered to their own
			// tenant (TestWatchTenantSeesOnlyItsServersAndTools); a token
			// with no tenant gets no stream at all.
			if strings.HasPrefix(name, "no tenant") {
				stream, err := c.Watch(ctx, &registryv1.WatchRequest{})
				if err == nil {
					_, err = stream.Recv()
				}
				wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
			}
			_, err = c.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenantB})
			if strings.HasPrefix(name, "tenant-b") {
				if err != nil {
					t.Fatalf("its own tenant's policy: %v", err)
				}
			} else {
				wantCode(t, err, codes.NotFound, "NOT_FOUND")
			}
		})
	}
	if e := epochOf(t, admin, tenant); e != epochA {
		t.Fatalf("tenant-a's epoch moved %d -> %d under principals of no standing", epochA, e)
	}
	if tool, _ := getTool(t, admin, toolID); tool.GetEnabled() || tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("the tool changed: %v", tool)
	}
	// The real owner still can.
	if _, err := owner.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: digest}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: toolID}); err != nil {
		t.Fatal(err)
	}

	// Owners must name their tenant.
	for _, bad := range []string{"group:" + owners, "lee", "tenant-a/" + owners, "Tenant-A/group:x", "tenant-a/group:two words"} {
		s := logisticsServer()
		s.ServerId, s.Owner = "other", bad
		_, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: s})
		vs := wantFields(t, err, "server.owner")
		if slices.ContainsFunc(vs, func(v violation) bool { return strings.Contains(v.description, bad) }) {
			t.Fatalf("the owner was echoed: %v", vs)
		}
	}
	s := logisticsServer()
	s.ServerId, s.Owner = "other", principal.UserOwner(tenantB, "lee").String()
	if resp, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: s}); err != nil || resp.GetServer().GetOwner() != "tenant-b/user:lee" {
		t.Fatalf("a user owner: %v %v", resp, err)
	}
}

// A token longer-lived than --auth-max-token-lifetime (24h by default) is
// refused at the API, with or without iat, even for an admin.
func TestHundredYearTokenIsRefused(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true})
	ctx := ctxT(t)
	century := 100 * 365 * 24 * time.Hour
	for name, c := range map[string]principal.Claims{
		"with iat":    {Subject: "test-admin", Tenant: servicetest.PlatformTenant, Groups: []string{adminGrp}, TTL: century},
		"without iat": {Subject: "test-admin", Tenant: servicetest.PlatformTenant, Groups: []string{adminGrp}, TTL: century, OmitIssuedAt: true},
		"25 hours":    {Subject: "alice", Tenant: tenant, TTL: 25 * time.Hour},
	} {
		_, err := r.Client(t, r.Auth.Token(t, c)).ListServers(ctx, &registryv1.ListServersRequest{})
		st := wantCode(t, err, codes.Unauthenticated, "INVALID_TOKEN")
		if !strings.Contains(st.Message(), "exceeds the maximum") {
			t.Fatalf("%s: %v", name, st.Message())
		}
	}
	ok := r.Auth.Token(t, principal.Claims{Subject: "test-admin", Tenant: servicetest.PlatformTenant, Groups: []string{adminGrp}, TTL: 24 * time.Hour})
	if _, err := r.Client(t, ok).ListServers(ctx, &registryv1.ListServersRequest{}); err != nil {
		t.Fatalf("a 24h token: %v", err)
	}
}

// GetPolicy at a past epoch answers the grants and classes in force at that
// epoch, and keeps answering the same once later changes happened: a grant
// at E1 revoked at E2 is in the policy at E1 and not at E2; a class changed
// later keeps its old servers at E1; an epoch from a tool change (no
// grant or class change) shows what was in force; an epoch not reached is
// OUT_OF_RANGE EPOCH_NOT_REACHED; a negative one INVALID_ARGUMENT.
func TestPolicyAtPastEpoch(t *testing.T) {
	t.Parallel()
	r, ctx, admin := startFixture(t)
	g, err := admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Subject: "alice",
		Scopes: []string{"shipment:read"}, AudienceClasses: []string{class}})
	if err != nil {
		t.Fatal(err)
	}
	e1 := g.GetPolicyEpoch()
	at := func(epoch int64) *registryv1.Policy {
		t.Helper()
		resp, err := admin.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant, AtEpoch: epoch})
		if err != nil {
			t.Fatalf("at %d: %v", epoch, err)
		}
		if resp.GetPolicy().GetPolicyEpoch() != epoch || resp.GetRevision() == 0 {
			t.Fatalf("at %d: %v", epoch, resp)
		}
		return resp.GetPolicy()
	}
	atE1 := at(e1)
	cur, err := admin.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant})
	if err != nil || !proto.Equal(cur.GetPolicy(), atE1) {
		t.Fatalf("the policy at the current epoch differs from the current policy:\n%v\n%v", cur.GetPolicy(), atE1)
	}

	rv, err := admin.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenant, Subject: "alice",
		Scopes: []string{"shipment:read"}, AudienceClasses: []string{class}})
	if err != nil {
		t.Fatal(err)
	}
	e2 := rv.GetPolicyEpoch()
	if e2 != e1+1 {
		t.Fatalf("epochs %d, %d", e1, e2)
	}
	// A class change and a server change that bumps (trust level) follow.
	ac, err := admin.GetAudienceClass(ctx, &registryv1.GetAudienceClassRequest{Name: class})
	if err != nil {
		t.Fatal(err)
	}
	next := proto.Clone(ac.GetAudienceClass()).(*registryv1.AudienceClass)
	next.Servers[0].SecretRef = "file:/run/secrets/new"
	put, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: next, ExpectedVersion: next.GetVersion()})
	if err != nil {
		t.Fatal(err)
	}
	e3 := put.GetPolicyEpoch()
	srv, err := admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: server})
	if err != nil {
		t.Fatal(err)
	}
	upd := proto.Clone(srv.GetServer()).(*registryv1.Server)
	upd.TrustLevel = registryv1.TrustLevel_TRUST_LEVEL_PARTNER
	if _, err := admin.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: upd, ExpectedVersion: upd.GetVersion()}); err != nil {
		t.Fatal(err)
	}
	e4 := epochOf(t, admin, tenant)
	if e4 != e3+1 {
		t.Fatalf("the trust level change did not bump: %d after %d", e4, e3)
	}

	if again := at(e1); !proto.Equal(again, atE1) {
		t.Fatalf("the policy at %d changed after it passed:\n%v\n%v", e1, atE1, again)
	}
	if gs := atE1.GetGrants(); len(gs) != 1 || gs[0].GetSubject() != "alice" || !slices.Equal(gs[0].GetScopes(), []string{"shipment:read"}) ||
		!slices.Equal(gs[0].GetAudienceClasses(), []string{class}) {
		t.Fatalf("grants at %d: %v", e1, gs)
	}
	if gs := at(e2).GetGrants(); len(gs) != 0 {
		t.Fatalf("the revoked grant is still in the policy at %d: %v", e2, gs)
	}
	if ref := at(e2).GetAudienceClasses()[0].GetServers()[0].GetSecretRef(); ref != secretA {
		t.Fatalf("class at %d has %q", e2, ref)
	}
	if ref := at(e3).GetAudienceClasses()[0].GetServers()[0].GetSecretRef(); ref != "file:/run/secrets/new" {
		t.Fatalf("class at %d has %q", e3, ref)
	}
	p3, p4 := at(e3), at(e4)
	p3.PolicyEpoch = e4
	if !proto.Equal(p3, p4) {
		t.Fatalf("a trust level change altered the grants or classes:\n%v\n%v", p3, p4)
	}
	// Epoch 1: the tenant as created, before its class existed.
	if p1 := at(1); len(p1.GetGrants()) != 0 || len(p1.GetAudienceClasses()) != 0 {
		t.Fatalf("policy at 1: %v", p1)
	}

	_, err = admin.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant, AtEpoch: e4 + 1})
	wantCode(t, err, codes.OutOfRange, "EPOCH_NOT_REACHED")
	_, err = admin.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant, AtEpoch: -1})
	wantFields(t, err, "at_epoch")
	_, err = admin.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: "ghost", AtEpoch: 1})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")

	// A tenant user reads its own tenant's past policy, without references.
	mine, err := r.Client(t, r.Auth.User(t, "alice", tenant)).GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant, AtEpoch: e3})
	if err != nil || mine.GetPolicy().GetAudienceClasses()[0].GetServers()[0].GetSecretRef() != "" {
		t.Fatalf("own past policy: %v %v", mine, err)
	}
}

// A megabyte of input in a tenant id, a class name or an owner is refused
// with a field violation that does not echo it.
func TestMegabyteTenantClassAndOwnerAreRefusedWithoutEcho(t *testing.T) {
	t.Parallel()
	_, ctx, admin := startFixture(t)
	huge := strings.Repeat("a", 1<<20)
	_, err := admin.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: huge})
	checkShort(t, wantFields(t, err, "tenant_id"), err)
	_, err = admin.GetAudienceClass(ctx, &registryv1.GetAudienceClassRequest{Name: huge + "." + huge})
	checkShort(t, wantFields(t, err, "name"), err)
	_, err = admin.ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{TenantId: huge})
	checkShort(t, wantFields(t, err, "tenant_id"), err)
	s := logisticsServer()
	s.ServerId, s.Owner = "other", "tenant-a/group:"+huge
	_, err = admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: s})
	checkShort(t, wantFields(t, err, "server.owner"), err)
}

func checkShort(t *testing.T, vs []violation, err error) {
	t.Helper()
	if n := len(status.Convert(err).Message()); n > 1000 {
		t.Fatalf("a %d-byte message", n)
	}
	for _, v := range vs {
		if len(v.description) > 200 {
			t.Fatalf("a %d-byte description", len(v.description))
		}
	}
}
