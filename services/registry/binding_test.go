package registry_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// TestGetBinding: GetBinding answers a server as one class reads it, in one
// snapshot (the epoch and revision move with a policy change); the binding
// is unset for a class that does not cover the server; an unknown server
// or class, and another tenant's class, are NOT_FOUND; only admins and
// services see the secret reference; bad names are INVALID_ARGUMENT.
func TestGetBinding(t *testing.T) {
	r, ctx, admin := startFixture(t)
	req := &registryv1.GetBindingRequest{ServerId: server, AudienceClass: class}
	got, err := admin.GetBinding(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetServer().GetServerId() != server || got.GetServer().GetVersion() != 1 || got.GetTenantId() != tenant ||
		got.GetBinding().GetServerId() != server || got.GetBinding().GetSecretRef() != "env:LOGISTICS_TOKEN" ||
		got.GetPolicyEpoch() != epochOf(t, admin, tenant) || got.GetRevision() == 0 {
		t.Fatalf("GetBinding = %v", got)
	}

	// A policy change moves the epoch and the revision the binding reports.
	if _, err := admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Group: "readers",
		Scopes: []string{"shipments:read"}, AudienceClasses: []string{class}}); err != nil {
		t.Fatal(err)
	}
	again, err := admin.GetBinding(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetPolicyEpoch() != got.GetPolicyEpoch()+1 || again.GetRevision() <= got.GetRevision() {
		t.Fatalf("after a grant: epoch %d revision %d, before %d %d", again.GetPolicyEpoch(), again.GetRevision(),
			got.GetPolicyEpoch(), got.GetRevision())
	}

	// A class of the tenant that does not cover the server: no binding.
	if _, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: tenant + ".empty", TenantId: tenant}}); err != nil {
		t.Fatal(err)
	}
	empty, err := admin.GetBinding(ctx, &registryv1.GetBindingRequest{ServerId: server, AudienceClass: tenant + ".empty"})
	if err != nil || empty.GetBinding() != nil || empty.GetTenantId() != tenant || empty.GetServer().GetServerId() != server {
		t.Fatalf("uncovered class: %v %v", empty, err)
	}

	// Secret references only for admins and services; another tenant's
	// class is NOT_FOUND, as a missing one.
	svc, err := r.Client(t, r.Auth.Service(t)).GetBinding(ctx, req)
	if err != nil || svc.GetBinding().GetSecretRef() != "env:LOGISTICS_TOKEN" {
		t.Fatalf("service: %v %v", svc, err)
	}
	user, err := r.Client(t, r.Auth.User(t, "alice", tenant, "readers")).GetBinding(ctx, req)
	if err != nil || user.GetBinding().GetServerId() != server || user.GetBinding().GetSecretRef() != "" {
		t.Fatalf("tenant user: %v %v", user, err)
	}
	_, err = r.Client(t, r.Auth.User(t, "bob", "tenant-b", "readers")).GetBinding(ctx, req)
	wantCode(t, err, codes.NotFound, "NOT_FOUND")

	_, err = admin.GetBinding(ctx, &registryv1.GetBindingRequest{ServerId: "nope", AudienceClass: class})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")
	_, err = admin.GetBinding(ctx, &registryv1.GetBindingRequest{ServerId: server, AudienceClass: tenant + ".nope"})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")
	_, err = admin.GetBinding(ctx, &registryv1.GetBindingRequest{ServerId: "Bad Id", AudienceClass: ""})
	wantFields(t, err, "audience_class", "server_id")
}
