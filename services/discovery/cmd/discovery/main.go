// Command discovery runs the toolcrib discovery service: `discovery [flags]` serves until
// SIGINT or SIGTERM (then drains), `discovery migrate [flags]` applies its schema
// and exits. Every flag has a TOOLCRIB_* environment twin; `discovery -h` lists
// them.
package main

import (
	"context"

	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/services/discovery"
)

func main() { service.Main("discovery", run) }

// run is the command: migrate, or serve until ctx ends.
func run(ctx context.Context, args []string) error {
	return service.Command("discovery",
		func(args []string) (discovery.Config, error) { return discovery.ParseConfig(args, nil) },
		discovery.Usage, discovery.Run, discovery.Migrate)(ctx, args)
}
