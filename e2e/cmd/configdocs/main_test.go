package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/platform/config"
)

// The checked-in tables are what the services' flag sets say now: a flag
// added, renamed or given another default without `make docs` fails here
// (and in CI's freshness step).
func TestCheckedInTablesAreFresh(t *testing.T) {
	dir := t.TempDir()
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	for _, s := range services {
		want, err := os.ReadFile(filepath.Join(dir, s.name+".md"))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", "..", "docs", "config", s.name+".md")
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run `make docs`)", err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: run `make docs` and commit it", path)
		}
	}
}

// Every service's own flags appear with their environment twins and
// defaults, as the service parses them.
func TestTablesShowEachServicesFlags(t *testing.T) {
	pages := map[string]string{}
	for _, s := range services {
		pages[s.name] = string(render(s.name, s.about, s.flags()))
	}
	for svc, row := range map[string]string{
		"registry":  "| `--listen` | `TOOLCRIB_REGISTRY_LISTEN` | `127.0.0.1:7101` | gRPC listen address |",
		"discovery": "| `--refresh-interval` | `TOOLCRIB_REFRESH_INTERVAL` | `15m0s` | default time between scans of a server (its scan_interval overrides it) |",
		"admission": "| `--metrics-listen` | `TOOLCRIB_ADMISSION_METRICS_LISTEN` | `127.0.0.1:9103` | Prometheus /metrics HTTP address; empty disables it |",
		"lease":     "| `--listen` | `TOOLCRIB_LEASE_LISTEN` | `127.0.0.1:7104` |",
		"gateway":   "| `--mcp-listen` | `TOOLCRIB_GATEWAY_MCP_LISTEN` | `127.0.0.1:7105` | MCP endpoint address (streamable HTTP, path /mcp); TLS with --tls-cert-file",
	} {
		if !strings.Contains(pages[svc], row) {
			t.Errorf("%s: no row %q in\n%s", svc, row, pages[svc])
		}
	}
	if strings.Contains(pages["registry"], "--redis-addr") {
		t.Error("registry uses no Redis, but its table lists --redis-addr")
	}
}

func TestRenderEscapesCells(t *testing.T) {
	page := string(render("toy", "a test", []config.Flag{
		{Name: "sep", Env: "TOOLCRIB_SEP", Default: "a|b", Usage: "one | two\nthree"},
		{Name: "empty", Env: "TOOLCRIB_EMPTY", Usage: "nothing by default"},
	}))
	for _, row := range []string{
		"| `--sep` | `TOOLCRIB_SEP` | `a\\|b` | one \\| two three |",
		"| `--empty` | `TOOLCRIB_EMPTY` | *(empty)* | nothing by default |",
	} {
		if !strings.Contains(page, row+"\n") {
			t.Errorf("no row %q in\n%s", row, page)
		}
	}
}
