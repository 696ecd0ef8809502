// Command gateway runs the toolcrib MCP gateway: `gateway [flags]` serves
// MCP on http://127.0.0.1:7105/mcp until SIGINT or SIGTERM (then drains),
// `gateway migrate [flags]` applies its schema and exits. Every flag has a
// TOOLCRIB_* environment twin; `gateway -h` lists them.
package main

import (
	"context"

	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/services/gateway"
)

func main() { service.Main("gateway", run) }

// run is the command: migrate, or serve until ctx ends.
func run(ctx context.Context, args []string) error {
	return service.Command("gateway",
		func(args []string) (gateway.Config, error) { return gateway.ParseConfig(args, nil) },
		gateway.Usage, gateway.Run, gateway.Migrate)(ctx, args)
}
