package faults_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
)

// TestServerIdentityChangeIsQuarantined: an https MCP server is pinned on
// first use to the SPKI of its TLS leaf key. When it later presents a
// rotated, unpinned key (still signed by a CA discovery trusts, so the
// chain verifies) the scan ends QUARANTINED IDENTITY_MISMATCH, is not
// retried, sends no tools/list (the handshake is refused before any
// credential leaves), and activates nothing: the pinned generation stays
// the active one. A server registered with a pin it never presented is
// quarantined on its first scan and never has anything active.
func TestServerIdentityChangeIsQuarantined(t *testing.T) {
	t.Parallel()
	s := startFixture(t, fixture.Script{Versioned: true, PageSize: 2, Tools: tools("inv", 3)})
	ep := serveHTTP(t, s, fixture.HTTPOptions{TLS: true})
	caFile := filepath.Join(t.TempDir(), "fixture-ca.pem")
	if err := os.WriteFile(caFile, ep.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startDiscovery(t, envOptions{configure: func(c *discovery.Config) { c.TLSCAFile = caFile }})

	t.Run("pinned on first use, then rotated", func(t *testing.T) {
		e.register("inventory", overHTTP(ep.URL), serverProvided, "")
		first := e.wait(e.scan("inventory", class), nil)
		want(t, first, eligible, noReason)
		pinned := ep.SPKIDigest()
		if pin := e.reg.GetServerRecord("inventory").GetIdentityPin(); pin != pinned || first.GetIdentityDigest() != pinned {
			t.Fatalf("pin %q, run identity %q, want the leaf key %q", pin, first.GetIdentityDigest(), pinned)
		}
		e.checkWhole(t, "inventory", class, s.Log().Events())

		rotated, err := ep.RotateKey()
		if err != nil {
			t.Fatal(err)
		}
		requests := s.Requests()
		id := e.scan("inventory", class)
		second := e.wait(id, nil)
		want(t, second, quarantined, discoveryv1.RunReason_RUN_REASON_IDENTITY_MISMATCH)
		if second.GetGeneration() != 0 || s.Requests() != requests {
			t.Fatalf("the quarantined run committed generation %d; the server saw %d tools/list requests after the rotation", second.GetGeneration(), s.Requests()-requests)
		}
		if pin := e.reg.GetServerRecord("inventory").GetIdentityPin(); pin != pinned || rotated == pinned {
			t.Fatalf("pin moved to %q (rotated key %q)", pin, rotated)
		}
		time.Sleep(500 * time.Millisecond) // several retry delays: a quarantined scan is not retried
		if runs := e.runs(id); len(runs) != 1 {
			t.Fatalf("%d runs of the quarantined scan, want 1", len(runs))
		}
		e.onlyGenerationsFrom("inventory", class, first)
		if p := e.active("inventory", class).GetPointer(); p.GetGeneration() != 1 || p.GetSnapshotState() != eligible {
			t.Fatalf("pointer after the refused scan: %v", p)
		}
	})

	t.Run("pinned to a key never presented", func(t *testing.T) {
		e.register("impostor", overHTTP(ep.URL), serverProvided, crawl.SPKIDigest([]byte("some other key")))
		r := e.wait(e.scan("impostor", class), nil)
		want(t, r, quarantined, discoveryv1.RunReason_RUN_REASON_IDENTITY_MISMATCH)
		if e.active("impostor", class) != nil || len(e.generations("impostor", class)) != 0 {
			t.Fatal("a server whose identity never matched has a generation")
		}
	})
}
