package main

import (
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/services/gateway"
)

// `dev up` starts the gateway on its default MCP address in front of the
// local services, with upstreams on loopback allowed; the environment
// still overrides, and a bad value is still refused.
func TestDevGatewayConfig(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	cfg, err := devGatewayConfig(none)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MCPListen != gateway.DefaultMCPListen || cfg.ListenAddr != gateway.DefaultListenAddr || cfg.AdmissionAddr != "127.0.0.1:7103" ||
		cfg.LeaseAddr != "127.0.0.1:7104" || cfg.RegistryAddr != "127.0.0.1:7101" || cfg.DiscoveryAddr != "127.0.0.1:7102" ||
		cfg.Egress.AllowLoopback || cfg.Egress.AllowLoopbackPorts != devLoopbackPorts {
		t.Fatalf("%+v", cfg)
	}
	env := map[string]string{"TOOLCRIB_GATEWAY_MCP_LISTEN": "127.0.0.1:8105"}
	cfg, err = devGatewayConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil || cfg.MCPListen != "127.0.0.1:8105" {
		t.Fatalf("%+v %v", cfg, err)
	}
	env = map[string]string{"TOOLCRIB_LEASE_ADDR": "no-port"}
	if _, err := devGatewayConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err == nil ||
		!strings.Contains(err.Error(), "--lease-addr") {
		t.Fatalf("bad lease address: %v", err)
	}
}
