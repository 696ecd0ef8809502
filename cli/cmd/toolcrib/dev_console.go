package main

import (
	"context"

	"github.com/toolcrib/toolcrib/services/console"
)

// consoleLaunchable is the review console as `dev up` starts it: pages on
// https://127.0.0.1:7106 (health 127.0.0.1:7116, metrics 9106), calling
// the local registry, discovery and admission with the signed-in user's
// token; cfg is from devConsoleConfig.
func consoleLaunchable(cfg console.Config) launchable {
	return launchable{name: "console", health: cfg.ListenAddr,
		addrs: "pages " + devConsoleURL(cfg) + "  gRPC health " + cfg.ListenAddr + "  metrics " + metricsURL(cfg.MetricsAddr),
		run:   func(ctx context.Context) error { return console.Run(ctx, cfg) }}
}

// devConsoleURL is the console's URL on this machine: --public-url, or its
// --http-listen address (https under TLS).
func devConsoleURL(cfg console.Config) string {
	if cfg.PublicURL != "" {
		return cfg.PublicURL
	}
	if cfg.TLS.ServerEnabled() {
		return "https://" + cfg.HTTPListen
	}
	return "http://" + cfg.HTTPListen
}

// devConsoleConfig is the console configuration of `dev up` from the
// environment lookup (nil: os.LookupEnv): signing in with a pasted dev
// token (`toolcrib dev token`) is on, as nothing else can sign in there.
func devConsoleConfig(lookup func(string) (string, bool)) (console.Config, error) {
	cfg, _ := console.ParseConfig(nil, lookup) // validated below, with dev sign-in
	cfg.DevSignIn = true
	return cfg, cfg.Validate()
}
