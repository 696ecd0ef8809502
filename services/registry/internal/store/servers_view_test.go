package store

import (
	"context"
	"errors"
	"slices"
	"testing"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// A tenant's users read the servers their tenant's audience classes cover
// and the servers their tenant owns; another tenant's server (its URL,
// owner, pins) is not even confirmed to exist. Platform admins and services
// read every server.
func TestServersAreReadPerTenant(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	seed(t, s) // srv: owned by tenant-a, covered by acme.readers
	for _, sv := range []*registryv1.Server{
		{ServerId: "b-only", Owner: "tenant-b/group:ops"},
		{ServerId: "acme-own", Owner: "acme/group:ops"},
	} {
		sv.Transport = &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: "x"}}
		sv.TrustLevel = registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY
		sv.RevisionSource = registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED
		if _, err := s.RegisterServer(ctx, sv); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(v View) []string {
		t.Helper()
		var out []string
		for after := ""; ; {
			list, more, _, err := s.ListServers(ctx, v, Page{After: after, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, sv := range list {
				out = append(out, sv.GetServerId())
			}
			if !more {
				return out
			}
			after = list[len(list)-1].GetServerId()
		}
	}
	cases := []struct {
		name string
		view View
		want []string
	}{
		{"admin or service", all, []string{"acme-own", "b-only", "srv"}},
		{"acme: covered by its class, and its own", View{Tenant: "acme"}, []string{"acme-own", "srv"}},
		{"tenant-a: owns srv", View{Tenant: "tenant-a"}, []string{"srv"}},
		{"tenant-b: its own only", View{Tenant: "tenant-b"}, []string{"b-only"}},
		{"a tenant with nothing", View{Tenant: "tenant-c"}, nil},
		{"no tenant", View{}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ids(c.view); !slices.Equal(got, c.want) {
				t.Fatalf("ListServers %v, want %v", got, c.want)
			}
			for _, id := range []string{"acme-own", "b-only", "srv", "missing"} {
				_, err := s.GetServer(ctx, c.view, id)
				var nf *NotFoundError
				switch {
				case slices.Contains(c.want, id) && err != nil:
					t.Fatalf("GetServer %s: %v", id, err)
				case !slices.Contains(c.want, id) && !errors.As(err, &nf):
					t.Fatalf("GetServer %s seen by %+v: %v, want not found", id, c.view, err)
				}
			}
		})
	}
}
