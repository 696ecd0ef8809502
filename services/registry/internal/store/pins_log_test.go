package store

import (
	"context"
	"slices"
	"testing"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// The pins of one PinIdentities call are appended to the log in one
// statement: one UPDATED change per pinned server, at consecutive
// revisions in the order of the pins, each seen by the tenants of the
// classes covering its server (none for a server no class covers), each
// carrying the stored server.
func TestPinsAppendInOrderEachWithItsTenants(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	versions := map[string]int64{}
	for _, id := range []string{"s1", "s2", "s3"} {
		srv, err := s.RegisterServer(ctx, &registryv1.Server{ServerId: id, Owner: "tenant-a/user:alice",
			Transport:  &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: id}},
			TrustLevel: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY, RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		})
		if err != nil {
			t.Fatal(err)
		}
		versions[id] = srv.GetVersion()
	}
	for _, c := range []struct {
		tenant, class string
		servers       []string
	}{
		{"acme", "acme.readers", []string{"s1", "s2"}}, {"beta", "beta.readers", []string{"s2"}},
	} {
		if _, err := s.PutTenant(ctx, &registryv1.Tenant{TenantId: c.tenant}); err != nil {
			t.Fatal(err)
		}
		var b []*registryv1.AudienceServer
		for _, id := range c.servers {
			b = append(b, &registryv1.AudienceServer{ServerId: id})
		}
		if _, _, err := s.PutAudienceClass(ctx, &registryv1.AudienceClass{Name: c.class, TenantId: c.tenant, Servers: b}, 0); err != nil {
			t.Fatal(err)
		}
	}
	head, err := s.Log().Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	order := []string{"s3", "s1", "s2"}
	var pins []Pin
	for _, id := range order {
		pins = append(pins, Pin{ServerID: id, ExpectedVersion: versions[id], IdentityPin: "sha256:" + id})
	}
	res, err := s.PinIdentities(ctx, pins)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.GetOutcome() != registryv1.PinOutcome_PIN_OUTCOME_PINNED {
			t.Fatalf("pin %d: %v", i, r)
		}
	}
	entries, err := s.Log().Read(ctx, head, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"s3": {}, "s1": {"acme"}, "s2": {"acme", "beta"}}
	if len(entries) != len(order) {
		t.Fatalf("%d changes after the pins, want %d", len(entries), len(order))
	}
	for i, e := range entries {
		ch, err := DecodeChange(e)
		if err != nil {
			t.Fatal(err)
		}
		id := order[i]
		srv := ch.GetServer()
		if e.Revision != head+int64(i)+1 || e.Kind != "server" || ch.GetKind() != registryv1.ChangeKind_CHANGE_KIND_UPDATED ||
			srv.GetServerId() != id || srv.GetIdentityPin() != "sha256:"+id || srv.GetVersion() != versions[id]+1 ||
			!slices.Equal(e.Tenants, want[id]) {
			t.Fatalf("change %d at revision %d (%s): %v seen by %q, want %s pinned, seen by %q", i, e.Revision, e.Kind, ch, e.Tenants, id, want[id])
		}
	}
}
