package main

import (
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/services/registry"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"
)

// Issue 20.7: under `make run` (`dev up`'s configuration) the registry
// accepts the example server's URL and refuses a server registered at
// Postgres, Redis or one of the suite's own loopback ports, naming the
// egress rule; discovery and the gateway get the same policy, so nothing
// dials those ports either.
func TestDevUpEgressAdmitsTheExampleServerAndRefusesTheSuitesPorts(t *testing.T) {
	t.Chdir(t.TempDir()) // dev up creates .toolcrib/secrets in the working directory
	none := func(string) (string, bool) { return "", false }
	rcfg, err := devRegistryConfig(none)
	if err != nil {
		t.Fatal(err)
	}
	dcfg, err := devDiscoveryConfig(none)
	if err != nil {
		t.Fatal(err)
	}
	gcfg, err := devGatewayConfig(none)
	if err != nil {
		t.Fatal(err)
	}
	if rcfg.Egress != dcfg.Egress || rcfg.Egress != gcfg.Egress {
		t.Fatalf("dev up's services disagree on egress: registry %+v, discovery %+v, gateway %+v", rcfg.Egress, dcfg.Egress, gcfg.Egress)
	}
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true, Configure: func(c *registry.Config) { c.Egress = rcfg.Egress }})
	admin := r.Auth.Admin(t)
	register := func(id, url string) error {
		_, err := cli(t, r, admin, "server", "register", "--owner", "tenant-a/group:inventory-team", "--url", url,
			"--trust", "first-party", id)
		return err
	}
	for i, url := range []string{
		"http://127.0.0.1:5432/mcp", // Postgres
		"http://127.0.0.1:6379/mcp", // Redis
		"http://127.0.0.1:7101/mcp", // the registry itself
		"http://localhost:7104/mcp", // the lease service
		"http://[::1]:7106/mcp",     // the console
		"http://127.0.0.1:9103/metrics",
		"http://127.0.0.1/mcp", // port 80
	} {
		err := register("probe"+string(rune('a'+i)), url)
		if err == nil {
			t.Errorf("%s was registered", url)
			continue
		}
		if msg := describe(err); !strings.Contains(msg, "server.streamable_http.url") ||
			!strings.Contains(msg, "refused by the egress policy, rule loopback-port") {
			t.Errorf("%s: %s", url, msg)
		}
	}
	if err := register("inventory", "http://127.0.0.1:7301/mcp"); err != nil {
		t.Fatalf("the example server's URL was refused: %s", describe(err))
	}
	out := mustCLI(t, r, admin, "server", "list")
	if !strings.Contains(out, "inventory") || strings.Contains(out, "probe") {
		t.Fatalf("server list:\n%s", out)
	}
}
