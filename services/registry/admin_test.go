package registry_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Admin RPCs refuse calls without a valid token (UNAUTHENTICATED) and
// verified principals that are not admins (PERMISSION_DENIED); Watch needs
// an admin, a service or a tenant principal (a tenant's Watch is filtered,
// see TestWatchTenantSeesOnlyItsServersAndTools), so the user for Watch has
// no tenant. The principal comes only from the token.
func TestAdminRPCsNeedAnAdminCredential(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true})
	ctx := ctxT(t)
	forged := servicetest.NewAuth(t) // another key: a well-formed token the registry must not trust
	callers := map[string]registryv1.RegistryServiceClient{
		"no token":     r.Client(t, ""),
		"forged token": r.Client(t, forged.Admin(t)),
		"user token":   r.Client(t, r.Auth.User(t, "alice", tenant, "readers")),
	}
	want := map[string]struct {
		code   codes.Code
		reason string
	}{
		"no token":     {codes.Unauthenticated, "UNAUTHENTICATED"},
		"forged token": {codes.Unauthenticated, "INVALID_TOKEN"},
		"user token":   {codes.PermissionDenied, "PERMISSION_DENIED"},
	}
	for name, c := range callers {
		w := want[name]
		calls := map[string]func() error{
			"RegisterServer": func() error {
				_, err := c.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: logisticsServer()})
				return err
			},
			"UpdateServer": func() error {
				_, err := c.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: logisticsServer(), ExpectedVersion: 1})
				return err
			},
			"DeleteServer": func() error {
				_, err := c.DeleteServer(ctx, &registryv1.DeleteServerRequest{ServerId: server, ExpectedVersion: 1})
				return err
			},
			"PutTenant": func() error {
				_, err := c.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tenant}})
				return err
			},
			"PutAudienceClass": func() error {
				_, err := c.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{Name: class, TenantId: tenant}})
				return err
			},
			"GrantScopes": func() error {
				_, err := c.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Subject: "alice", Scopes: []string{"a"}})
				return err
			},
			"RevokeScopes": func() error {
				_, err := c.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenant, Subject: "alice", Scopes: []string{"a"}})
				return err
			},
			"Watch": func() error {
				c := c
				if name == "user token" {
					c = r.Client(t, r.Auth.User(t, "nobody", "", "readers"))
				}
				stream, err := c.Watch(ctx, &registryv1.WatchRequest{})
				if err != nil {
					return err
				}
				_, err = stream.Recv()
				return err
			},
		}
		for rpc, call := range calls {
			t.Run(name+"/"+rpc, func(t *testing.T) { wantCode(t, call(), w.code, w.reason) })
		}
	}
	// Reads need a token, any verified one.
	_, err := r.Client(t, "").ListServers(ctx, &registryv1.ListServersRequest{})
	wantCode(t, err, codes.Unauthenticated, "UNAUTHENTICATED")
	if _, err := callers["user token"].ListServers(ctx, &registryv1.ListServersRequest{}); err != nil {
		t.Fatal(err)
	}
}

// Servers: registration validates every field at once (never echoing a
// credential), ids are unique, lists page and carry their revision, and an
// update with a stale version is ABORTED.
func TestServers(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true})
	ctx, admin := ctxT(t), r.Admin(t)

	bad := &registryv1.Server{ServerId: "Bad.Id", Owner: "group:",
		Transport:    &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: "https://user:hunter2@mcp.example.test/"}},
		IdentityPin:  "md5:abc",
		ScanInterval: durationpb.New(1),
	}
	_, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: bad})
	vs := wantFields(t, err, "server.identity_pin", "server.owner", "server.revision_source", "server.scan_interval",
		"server.server_id", "server.streamable_http.url", "server.trust_level")
	for _, v := range vs {
		if strings.Contains(v.description, "hunter2") {
			t.Fatalf("a credential was echoed: %v", v)
		}
	}
	plain := logisticsServer()
	plain.GetStreamableHttp().Url = "http://mcp.example.test/"
	_, err = admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: plain})
	wantFields(t, err, "server.streamable_http.url")

	for _, id := range []string{"alpha", "beta", "gamma"} {
		s := logisticsServer()
		s.ServerId = id
		if id == "beta" {
			s.Transport = &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: "beta-mcp", Args: []string{"--stdio"}}}
		}
		resp, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: s})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetServer().GetVersion() != 1 || resp.GetServer().GetCreatedAt() == nil {
			t.Fatalf("registered %v", resp.GetServer())
		}
	}
	_, err = admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: logisticsServer()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: logisticsServer()})
	wantCode(t, err, codes.AlreadyExists, "ALREADY_EXISTS")

	var ids []string
	var revision int64
	token := ""
	for {
		page, err := admin.ListServers(ctx, &registryv1.ListServersRequest{PageSize: 3, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.GetServers() {
			ids = append(ids, s.GetServerId())
		}
		revision = page.GetRevision()
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	if !slices.Equal(ids, []string{"alpha", "beta", "gamma", "logistics"}) || revision != 4 {
		t.Fatalf("listed %v at revision %d", ids, revision)
	}
	_, err = admin.ListServers(ctx, &registryv1.ListServersRequest{PageToken: "garbage"})
	wantFields(t, err, "page_token")

	got, err := admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: "beta"})
	if err != nil || got.GetServer().GetStdio().GetCommand() != "beta-mcp" || got.GetServer().GetScanInterval().AsDuration().Minutes() != 5 {
		t.Fatalf("get: %v %v", got, err)
	}
	_, err = admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: "nope"})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")

	upd := proto.Clone(got.GetServer()).(*registryv1.Server)
	upd.DisplayName = "Beta, renamed"
	resp, err := admin.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: upd, ExpectedVersion: 1})
	if err != nil || resp.GetServer().GetVersion() != 2 || resp.GetServer().GetDisplayName() != "Beta, renamed" {
		t.Fatalf("update: %v %v", resp, err)
	}
	_, err = admin.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: upd, ExpectedVersion: 1})
	st := wantCode(t, err, codes.Aborted, "VERSION_MISMATCH")
	if !strings.Contains(st.Message(), "version 2, not 1") {
		t.Fatalf("message %q", st.Message())
	}
}

// A service principal (discovery) may set an empty identity pin once (trust
// on first use) and nothing else; a changed trust level bumps the epoch of
// the tenants covering the server.
func TestServicePinsIdentityOnFirstUseOnly(t *testing.T) {
	t.Parallel()
	r, ctx, admin := startFixture(t)
	svc := r.Client(t, r.Auth.Service(t))
	pin := "sha256:" + strings.Repeat("ab", 32)

	cur, err := admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: server})
	if err != nil {
		t.Fatal(err)
	}
	sneaky := proto.Clone(cur.GetServer()).(*registryv1.Server)
	sneaky.IdentityPin, sneaky.Owner = pin, "tenant-a/user:mallory"
	_, err = svc.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: sneaky, ExpectedVersion: 1})
	wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")

	pinned := proto.Clone(cur.GetServer()).(*registryv1.Server)
	pinned.IdentityPin = pin
	epoch := epochOf(t, admin, tenant)
	resp, err := svc.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: pinned, ExpectedVersion: 1})
	if err != nil || resp.GetServer().GetIdentityPin() != pin || resp.GetServer().GetVersion() != 2 {
		t.Fatalf("first-use pin: %v %v", resp, err)
	}
	if epochOf(t, admin, tenant) != epoch {
		t.Fatal("pinning the identity bumped the epoch (it would fail discovery's own scan)")
	}
	again := proto.Clone(resp.GetServer()).(*registryv1.Server)
	again.IdentityPin = "sha256:" + strings.Repeat("cd", 32)
	_, err = svc.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: again, ExpectedVersion: 2})
	wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")

	user := r.Client(t, r.Auth.User(t, "alice", tenant))
	_, err = user.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: again, ExpectedVersion: 2})
	wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")

	// An admin may change the pin and the trust level; the latter bumps.
	again.TrustLevel = registryv1.TrustLevel_TRUST_LEVEL_THIRD_PARTY
	if _, err := admin.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: again, ExpectedVersion: 2}); err != nil {
		t.Fatal(err)
	}
	if e := epochOf(t, admin, tenant); e != epoch+1 {
		t.Fatalf("trust level change moved the epoch %d -> %d", epoch, e)
	}
}

// Audience classes hold secret references only, checked for form and never
// echoed; a stale version is ABORTED; each change bumps the owning tenant.
func TestAudienceClasses(t *testing.T) {
	t.Parallel()
	_, ctx, admin := startFixture(t)

	const token = "ghp_0123456789abcdefTOKEN"
	_, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: "tenant-a.Writers", TenantId: "tenant-b",
		Servers: []*registryv1.AudienceServer{{ServerId: server, SecretRef: token}, {ServerId: server, SecretRef: "file:relative/path"}},
	}})
	vs := wantFields(t, err, "audience_class.name", "audience_class.servers[0].secret_ref", "audience_class.servers[1].secret_ref",
		"audience_class.servers[1].server_id", "audience_class.tenant_id")
	for _, v := range vs {
		if strings.Contains(v.description, token) {
			t.Fatalf("a credential was echoed: %v", v)
		}
	}

	_, err = admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{Name: "nobody.readers", TenantId: "nobody"}})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")
	_, err = admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{Name: class, TenantId: tenant}})
	wantCode(t, err, codes.AlreadyExists, "ALREADY_EXISTS")

	epoch := epochOf(t, admin, tenant)
	cur, err := admin.GetAudienceClass(ctx, &registryv1.GetAudienceClassRequest{Name: class})
	if err != nil || cur.GetAudienceClass().GetServers()[0].GetSecretRef() != "env:LOGISTICS_TOKEN" {
		t.Fatalf("get: %v %v", cur, err)
	}
	next := proto.Clone(cur.GetAudienceClass()).(*registryv1.AudienceClass)
	next.Servers[0].SecretRef = "file:/run/secrets/logistics"
	put, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: next, ExpectedVersion: 1})
	if err != nil || put.GetAudienceClass().GetVersion() != 2 || put.GetPolicyEpoch() != epoch+1 {
		t.Fatalf("update: %v %v", put, err)
	}
	_, err = admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: next, ExpectedVersion: 1})
	wantCode(t, err, codes.Aborted, "VERSION_MISMATCH")

	list, err := admin.ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{ServerId: server})
	if err != nil || len(list.GetAudienceClasses()) != 1 || list.GetRevision() == 0 {
		t.Fatalf("list by server: %v %v", list, err)
	}
	list, err = admin.ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{ServerId: "other"})
	if err != nil || len(list.GetAudienceClasses()) != 0 {
		t.Fatalf("list by other server: %v %v", list, err)
	}
}

// Grants and revokes bump the tenant's epoch in the same transaction; two
// concurrent revokes get two epochs; a tenant reads only its own policy.
func TestGrantsRevokesAndPolicy(t *testing.T) {
	t.Parallel()
	r, ctx, admin := startFixture(t)
	if _, err := admin.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: "tenant-b"}}); err != nil {
		t.Fatal(err)
	}
	epoch := epochOf(t, admin, tenant)
	g, err := admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Group: "readers",
		Scopes: []string{"shipment:read", "order:read", "shipment:read"}, AudienceClasses: []string{class}})
	if err != nil {
		t.Fatal(err)
	}
	if g.GetPolicyEpoch() != epoch+1 || !slices.Equal(g.GetGrant().GetScopes(), []string{"order:read", "shipment:read"}) {
		t.Fatalf("grant: %v", g)
	}
	_, err = admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Subject: "alice", Group: "readers"})
	wantFields(t, err, "group", "scopes")
	_, err = admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Subject: "alice", AudienceClasses: []string{"tenant-b.readers", "tenant-a.nope"}})
	wantFields(t, err, "audience_classes[0]")
	_, err = admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Subject: "alice", AudienceClasses: []string{"tenant-a.nope"}})
	wantFields(t, err, "audience_classes[0]")
	_, err = admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: "ghost", Subject: "alice", Scopes: []string{"a"}})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")
	_, err = admin.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenant, Subject: "nobody", Scopes: []string{"a"}})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")

	epoch = epochOf(t, admin, tenant)
	scopes := []string{"shipment:read", "order:read"}
	wantConsecutiveEpochs(t, epoch, len(scopes), func(i int) (int64, error) {
		resp, err := admin.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenant, Group: "readers", Scopes: []string{scopes[i]}})
		return resp.GetPolicyEpoch(), err
	})

	mine := r.Client(t, r.Auth.User(t, "alice", tenant))
	pol, err := mine.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant})
	if err != nil {
		t.Fatal(err)
	}
	p := pol.GetPolicy()
	if p.GetPolicyEpoch() != epoch+2 || len(p.GetGrants()) != 1 || len(p.GetGrants()[0].GetScopes()) != 0 ||
		!slices.Equal(p.GetGrants()[0].GetAudienceClasses(), []string{class}) || len(p.GetAudienceClasses()) != 1 || pol.GetRevision() == 0 {
		t.Fatalf("policy %v", pol)
	}
	// Another tenant's policy is NOT_FOUND, as an unknown tenant's is.
	_, err = mine.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: "tenant-b"})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")
	if _, err := r.Client(t, r.Auth.Service(t)).GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: "tenant-b"}); err != nil {
		t.Fatalf("a service reads any tenant: %v", err)
	}
}

// N concurrent changes of one tenant's grants, through the API, give N
// distinct consecutive epochs.
func TestConcurrentGrantsGetConsecutiveEpochs(t *testing.T) {
	t.Parallel()
	_, ctx, admin := startFixture(t)
	wantConsecutiveEpochs(t, epochOf(t, admin, tenant), 16, func(i int) (int64, error) {
		resp, err := admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant,
			Subject: fmt.Sprintf("user-%d", i%3), Scopes: []string{fmt.Sprintf("scope:%d", i)}})
		return resp.GetPolicyEpoch(), err
	})
}

// wantConsecutiveEpochs runs n changes at once and fails unless they
// returned the n epochs after start, each once: no bump lost or shared.
func wantConsecutiveEpochs(t *testing.T, start int64, n int, change func(i int) (int64, error)) {
	t.Helper()
	got := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := change(i)
			if err != nil {
				t.Error(err)
			}
			got[i] = e
		}()
	}
	wg.Wait()
	slices.Sort(got)
	for i, e := range got {
		if e != start+int64(i)+1 {
			t.Fatalf("%d concurrent changes returned epochs %v, want the %d consecutive epochs after %d", n, got, n, start)
		}
	}
}

// Bad input is refused whole and precisely (I12): every RPC called with an
// empty request by an admin answers INVALID_ARGUMENT (or NOT_FOUND for a
// well-formed name that does not exist), never INTERNAL or UNKNOWN.
func TestEmptyRequestsAreRefusedPrecisely(t *testing.T) {
	t.Parallel()
	_, ctx, admin := startFixture(t)
	calls := map[string]func() error{
		"RegisterServer": func() error { _, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{}); return err },
		"GetServer":      func() error { _, err := admin.GetServer(ctx, &registryv1.GetServerRequest{}); return err },
		"UpdateServer":   func() error { _, err := admin.UpdateServer(ctx, &registryv1.UpdateServerRequest{}); return err },
		"PutTenant":      func() error { _, err := admin.PutTenant(ctx, &registryv1.PutTenantRequest{}); return err },
		"PutAudienceClass": func() error {
			_, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{})
			return err
		},
		"GetAudienceClass": func() error {
			_, err := admin.GetAudienceClass(ctx, &registryv1.GetAudienceClassRequest{})
			return err
		},
		"PublishContract": func() error { _, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{}); return err },
		"ApproveTool":     func() error { _, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{}); return err },
		"EnableTool":      func() error { _, err := admin.EnableTool(ctx, &registryv1.EnableToolRequest{}); return err },
		"DisableTool":     func() error { _, err := admin.DisableTool(ctx, &registryv1.DisableToolRequest{}); return err },
		"RollbackTool":    func() error { _, err := admin.RollbackTool(ctx, &registryv1.RollbackToolRequest{}); return err },
		"GetTool":         func() error { _, err := admin.GetTool(ctx, &registryv1.GetToolRequest{}); return err },
		"GrantScopes":     func() error { _, err := admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{}); return err },
		"RevokeScopes":    func() error { _, err := admin.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{}); return err },
		"GetPolicy":       func() error { _, err := admin.GetPolicy(ctx, &registryv1.GetPolicyRequest{}); return err },
		"ApproveTool unknown tool": func() error {
			_, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: "logistics.nope", ApprovalDigest: "sha256:" + strings.Repeat("0", 64)})
			return err
		},
		"ListTools bad state": func() error {
			_, err := admin.ListTools(ctx, &registryv1.ListToolsRequest{ReviewState: 42, PageSize: -1})
			return err
		},
	}
	for name, call := range calls {
		want := codes.InvalidArgument
		if strings.Contains(name, "unknown") {
			want = codes.NotFound
		}
		t.Run(name, func(t *testing.T) { wantCode(t, call(), want, "") })
	}
	// The empty lists are fine.
	if _, err := admin.ListServers(ctx, &registryv1.ListServersRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{}); err != nil {
		t.Fatal(err)
	}
}
