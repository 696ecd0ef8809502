// Command registry runs the toolcrib registry service: `registry [flags]` serves until
// SIGINT or SIGTERM (then drains), `registry migrate [flags]` applies its schema
// and exits. Every flag has a TOOLCRIB_* environment twin; `registry -h` lists
// them.
package main

import (
	"context"

	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/services/registry"
)

func main() { service.Main("registry", run) }

// run is the command: migrate, or serve until ctx ends.
func run(ctx context.Context, args []string) error {
	return service.Command("registry",
		func(args []string) (registry.Config, error) { return registry.ParseConfig(args, nil) },
		registry.Usage, registry.Run, registry.Migrate)(ctx, args)
}
