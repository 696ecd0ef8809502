// Command console runs the toolcrib review console: `console [flags]`
// serves its pages on http://127.0.0.1:7106 (https with --tls-cert-file)
// until SIGINT or SIGTERM (then drains); `console migrate` has nothing to
// apply (the console owns no table) and exits. Every flag has a TOOLCRIB_*
// environment twin; `console -h` lists them.
package main

import (
	"context"

	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/services/console"
)

func main() { service.Main("console", run) }

// run is the command: migrate, or serve until ctx ends.
func run(ctx context.Context, args []string) error {
	return service.Command("console",
		func(args []string) (console.Config, error) { return console.ParseConfig(args, nil) },
		console.Usage, console.Run, console.Migrate)(ctx, args)
}
