package main

import (
	"context"

	"github.com/toolcrib/toolcrib/services/gateway"
)

// gatewayLaunchable is the MCP gateway as `dev up` starts it: MCP on
// https://127.0.0.1:7105/mcp (health 127.0.0.1:7115, metrics 9105) in front
// of the local admission, lease, registry and discovery, with the dev
// launcher's egress and secret policy (upstreams on loopback allowed); cfg
// is from devGatewayConfig.
func gatewayLaunchable(cfg gateway.Config) launchable {
	return launchable{name: "gateway", health: cfg.ListenAddr, mcpURL: devMCPURL(cfg),
		addrs: "MCP " + devMCPURL(cfg) + "  gRPC health " + cfg.ListenAddr + "  metrics " + metricsURL(cfg.MetricsAddr),
		run:   func(ctx context.Context) error { return gateway.Run(ctx, cfg) }}
}

// devMCPURL is the gateway's MCP endpoint as clients on this machine reach
// it: --public-url, or its --mcp-listen address (https under TLS).
func devMCPURL(cfg gateway.Config) string {
	if cfg.PublicURL != "" {
		return cfg.PublicURL
	}
	if cfg.TLS.ServerEnabled() {
		return "https://" + cfg.MCPListen + gateway.MCPPath
	}
	return "http://" + cfg.MCPListen + gateway.MCPPath
}

// devGatewayConfig is the gateway configuration of `dev up` from the
// environment lookup (nil: os.LookupEnv).
func devGatewayConfig(lookup func(string) (string, bool)) (gateway.Config, error) {
	cfg, _ := gateway.ParseConfig(nil, lookup) // validated below, with the dev policy
	if err := devEgressAndSecrets(&cfg.Egress, &cfg.Secrets); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}
