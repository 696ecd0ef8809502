package main

import (
	"context"
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// `server register --pin-dir` stores the stdio server's pinned directory
// (part of its identity), `server show` prints it, and the flag without
// --command is refused before anything is sent.
func TestServerRegisterPinDir(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true})
	admin := r.Auth.Admin(t)
	mustCLI(t, r, admin, "server", "register", "--owner", "tenant-a/group:inventory-team", "--command", "node",
		"--arg", "server.js", "--pin-dir", "/opt/mcp/inventory", "--trust", "first-party", "inventory")
	got, err := r.Admin(t).GetServer(context.Background(), &registryv1.GetServerRequest{ServerId: "inventory"})
	if err != nil || got.GetServer().GetStdio().GetPinDir() != "/opt/mcp/inventory" {
		t.Fatalf("stored %v %v", got, err)
	}
	wantLines(t, mustCLI(t, r, admin, "server", "show", "inventory"), `pinned directory\s+/opt/mcp/inventory`)
	if _, err := cli(t, r, admin, "server", "register", "--owner", "tenant-a/group:inventory-team", "--url", "https://mcp.example.com/mcp",
		"--pin-dir", "/opt/mcp/x", "--trust", "first-party", "other"); err == nil || !strings.Contains(describe(err), "--command") {
		t.Fatalf("--pin-dir with --url: %v", err)
	}
}

// `apply` carries a stdio server's pin_dir (a url server with one is
// refused), and `export` writes it back, so a re-apply changes nothing.
func TestApplyAndExportCarryPinDir(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true})
	admin := r.Auth.Admin(t)
	file := writeFile(t, "registry.yaml", `version: 1
servers:
  - id: inventory
    owner: tenant-a/group:inventory-team
    command: node
    args: [server.js]
    pin_dir: /opt/mcp/inventory
    trust: first-party
`)
	mustCLI(t, r, admin, "apply", "-f", file)
	got, err := r.Admin(t).GetServer(context.Background(), &registryv1.GetServerRequest{ServerId: "inventory"})
	if err != nil || got.GetServer().GetStdio().GetPinDir() != "/opt/mcp/inventory" {
		t.Fatalf("stored %v %v", got, err)
	}
	exported := mustCLI(t, r, admin, "export")
	if !strings.Contains(exported, "pin_dir: /opt/mcp/inventory") {
		t.Fatalf("export:\n%s", exported)
	}
	again := writeFile(t, "exported.yaml", exported)
	wantLines(t, mustCLI(t, r, admin, "apply", "-f", again), `applied 0 change`)
	bad := writeFile(t, "bad.yaml", `version: 1
servers:
  - id: web
    owner: tenant-a/group:inventory-team
    url: https://mcp.example.com/mcp
    pin_dir: /opt/mcp/web
    trust: first-party
`)
	if _, err := cli(t, r, admin, "apply", "-f", bad); err == nil || !strings.Contains(describe(err), "pin_dir") {
		t.Fatalf("pin_dir on a url server: %v", err)
	}
}
