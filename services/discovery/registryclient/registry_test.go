package registryclient_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/credentials/insecure"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
)

const pin = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func start(t *testing.T) (*discoverytest.Registry, *registryclient.Client) {
	t.Helper()
	auth := servicetest.NewAuth(t)
	reg, addr := discoverytest.StartRegistry(t, auth)
	c, err := registryclient.Dial(addr, insecure.NewCredentials(), principal.BearerToken(auth.Service(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	reg.AddTenant("t")
	for _, id := range []string{"a", "b", "c"} {
		reg.PutServer(&registryv1.Server{ServerId: id, Owner: "t/group:x",
			Transport: &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: "http://127.0.0.1:1/" + id}}})
	}
	reg.PutClass(&registryv1.AudienceClass{Name: "t.readers", TenantId: "t", Servers: []*registryv1.AudienceServer{{ServerId: "a"}, {ServerId: "b"}}})
	return reg, c
}

// TestConcurrentBindingReadsEachGetTheirOwnAnswer: Binding calls made at
// once (which share GetBindings calls) each get their pair's binding, nil
// for a class not covering the server, and ErrNotFound for an unknown
// server or class.
func TestConcurrentBindingReadsEachGetTheirOwnAnswer(t *testing.T) {
	_, c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cases := []struct {
		server, class string
		bound         bool
		err           error
	}{
		{"a", "t.readers", true, nil},
		{"b", "t.readers", true, nil},
		{"c", "t.readers", false, nil},
		{"nope", "t.readers", false, registryclient.ErrNotFound},
		{"a", "t.nope", false, registryclient.ErrNotFound},
	}
	var wg sync.WaitGroup
	for round := range 20 {
		for _, tc := range cases {
			wg.Go(func() {
				b, err := c.Binding(ctx, tc.server, tc.class)
				if !errors.Is(err, tc.err) || (err == nil && (b.Server.GetServerId() != tc.server || b.TenantID != "t" ||
					(b.Binding != nil) != tc.bound || (tc.bound && b.Binding.GetServerId() != tc.server))) {
					t.Errorf("round %d: Binding(%s, %s) = %v, %v", round, tc.server, tc.class, b, err)
				}
			})
		}
	}
	wg.Wait()
}

// TestConcurrentPinsOfOneServerPinOnce: first-use pins of one server asked
// for at once by scans that read the same version: one pins, every other
// gets ErrConflict; a pin of an unknown server is ErrNotFound.
func TestConcurrentPinsOfOneServerPinOnce(t *testing.T) {
	reg, c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := reg.GetServerRecord("a")
	var wg sync.WaitGroup
	var mu sync.Mutex
	pinned, conflicts := 0, 0
	for range 16 {
		wg.Go(func() {
			s, err := c.PinIdentity(ctx, read, pin)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && s.GetIdentityPin() == pin && s.GetVersion() == read.GetVersion()+1:
				pinned++
			case errors.Is(err, registryclient.ErrConflict):
				conflicts++
			default:
				t.Errorf("PinIdentity = %v, %v", s, err)
			}
		})
	}
	wg.Wait()
	if pinned != 1 || conflicts != 15 {
		t.Fatalf("pinned %d, conflicts %d; want 1 and 15", pinned, conflicts)
	}
	if got := reg.GetServerRecord("a"); got.GetIdentityPin() != pin {
		t.Fatalf("stored %v", got)
	}
	if _, err := c.PinIdentity(ctx, &registryv1.Server{ServerId: "nope", Version: 1}, pin); !errors.Is(err, registryclient.ErrNotFound) {
		t.Fatalf("unknown server: %v", err)
	}
}
