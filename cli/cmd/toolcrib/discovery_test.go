package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// TestDiscoveryCommands drives the discovery commands against a real
// discovery service (its Run, on loopback, with a fake registry and a
// scripted MCP server over streamable HTTP).
func TestDiscoveryCommands(t *testing.T) {
	auth := servicetest.NewAuth(t)
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "discovery", Sets: discovery.Spec().Migrations})
	reg, regAddr := discoverytest.StartRegistry(t)
	cat := discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("inv", 3)...)
	mcpSrv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	reg.AddTenant("tenant-a")
	reg.PutServer(&registryv1.Server{ServerId: "inventory", TrustLevel: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: mcpSrv.URL}}})
	reg.PutClass(&registryv1.AudienceClass{Name: "tenant-a.readers", TenantId: "tenant-a",
		Servers: []*registryv1.AudienceServer{{ServerId: "inventory"}}})

	cfg, err := discovery.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Common = auth.Common(t, url, false, nil)
	cfg.RegistryAddr, cfg.NoAutoScans, cfg.Linger = regAddr, true, 0
	cfg.Egress.AllowLoopback = true // the MCP fixture listens on loopback
	addr := servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Listening = listening
		return discovery.Run(ctx, c)
	})
	admin := auth.Admin(t)
	cli := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		all := append([]string{"--discovery", addr, "--token", admin}, args...)
		if err := run(t.Context(), all, &out, &errOut); err != nil {
			t.Fatalf("toolcrib %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
		return out.String()
	}
	contains := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("output lacks %q:\n%s", w, out)
			}
		}
	}

	contains(cli("discovery", "scan", "--audience", "tenant-a.readers", "--wait", "inventory"), "ELIGIBLE", "inventory", "tenant-a.readers")
	cat.SetTools("r-2", discoverytest.Tools("inv", 4)...)
	contains(cli("discovery", "scan", "--wait", "inventory"), "ELIGIBLE")

	runs := cli("discovery", "runs", "--server", "inventory")
	contains(runs, "RUN", "ELIGIBLE", "MANUAL")
	var listed struct {
		Runs []struct {
			RunID string `json:"runId"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(cli("--json", "discovery", "runs", "--state", "eligible")), &listed); err != nil || len(listed.Runs) != 2 {
		t.Fatalf("runs as JSON: %v %v", listed, err)
	}
	contains(cli("discovery", "run", listed.Runs[1].RunID), "state:", "ELIGIBLE", "PAGE", "2@r-1", "closing re-check r-1")

	contains(cli("discovery", "snapshot", "inventory", "tenant-a.readers"), "generation 2", "inventory.inv_3", "source revision:", "r-2")
	contains(cli("discovery", "snapshot", "--generation", "1", "--raw", "inventory", "tenant-a.readers"), "RETIRED", `"name":"inv_0"`)
	contains(cli("discovery", "generations", "inventory", "tenant-a.readers"), "GEN", "r-2", "RETIRED")

	contains(cli("discovery", "rollback", "--expected", "2", "--reason", "cli test", "inventory", "tenant-a.readers"),
		"ACTIVE at generation 1 (was 2)", "ROLLBACK")
	contains(cli("discovery", "snapshot", "inventory", "tenant-a.readers"), "generation 1")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"--discovery", addr, "--token", admin, "discovery", "watch"}, &out, &errOut); err != nil {
		t.Fatalf("watch: %v %s", err, errOut.String())
	}
	contains(out.String(), "ACTIVATE", "ROLLBACK", "inventory/tenant-a.readers")

	var bad bytes.Buffer
	if err := run(t.Context(), []string{"--discovery", addr, "--token", admin, "discovery", "rollback", "inventory", "tenant-a.readers"}, &bad, &bad); err == nil {
		t.Fatal("rollback without --expected succeeded")
	}
}
