// Command lease runs the toolcrib lease service: `lease [flags]` serves
// until SIGINT or SIGTERM (then drains), `lease migrate [flags]` applies its
// schema and exits. Every flag has a TOOLCRIB_* environment twin; `lease -h`
// lists them.
package main

import (
	"context"

	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/services/lease"
)

func main() { service.Main("lease", run) }

// run is the command: migrate, or serve until ctx ends.
func run(ctx context.Context, args []string) error {
	return service.Command("lease",
		func(args []string) (lease.Config, error) { return lease.ParseConfig(args, nil) },
		lease.Usage, lease.Run, lease.Migrate)(ctx, args)
}
