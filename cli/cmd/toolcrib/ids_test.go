package main

import (
	"strings"
	"testing"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// TestApplyChecksIDsByTheRegistryGrammar: `toolcrib apply` refuses, before
// any call, the ids the registry would refuse (platform/ids): a tool id
// whose name breaks the MCP name rule (the CLI once accepted any name
// after the dot), a class with '_' in its tenant part, a server id with a
// dot.
func TestApplyChecksIDsByTheRegistryGrammar(t *testing.T) {
	file, err := parseRegistryFile([]byte(`version: 1
servers:
  - {id: log.istics, owner: tenant-a/user:x, url: 'https://example.test/mcp', trust: partner}
audience_classes:
  - {name: tenant_a.readers}
contracts:
  - {tool_id: 'logistics.bad name', effect: read-only, scope: shipment:read, authorization: caller-and-tenant}
`))
	if err != nil {
		t.Fatal(err)
	}
	empty := &state{servers: map[string]*registryv1.Server{}, classes: map[string]*registryv1.AudienceClass{},
		tenants: map[string]*registryv1.Policy{}, tools: map[string]*registryv1.Tool{}, stages: map[string]*registryv1.RolloutStage{}}
	_, err = check(file, empty, false)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"servers[0] (log.istics): id must match [a-z0-9][a-z0-9_-]{0,62}",
		"audience_classes[0] (tenant_a.readers): name must be <tenant_id>.<class>",
		"contracts[0] (logistics.bad name): tool_id must be <server_id>.<tool name>",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
