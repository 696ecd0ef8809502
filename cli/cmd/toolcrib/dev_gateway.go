package main

import (
	"context"

	"github.com/toolcrib/toolcrib/services/gateway"
)

// gatewayLaunchable is the MCP gateway as `dev up` starts it: MCP on
// http://127.0.0.1:7105/mcp (health 127.0.0.1:7115, metrics 9105) in front
// of the local admission, lease, registry and discovery, with the dev
// launcher's egress and secret policy (upstreams on loopback allowed).
func gatewayLaunchable() launchable {
	return launchable{name: "gateway", run: func(ctx context.Context) error {
		cfg, err := devGatewayConfig(nil)
		if err != nil {
			return err
		}
		return gateway.Run(ctx, cfg)
	}}
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
