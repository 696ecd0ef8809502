// Command admission runs the toolcrib admission service: `admission [flags]`
// serves until SIGINT or SIGTERM (then drains and flushes receipts),
// `admission migrate [flags]` applies its schema and exits. Every flag has a
// TOOLCRIB_* environment twin; `admission -h` lists them.
package main

import (
	"context"

	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/services/admission"
)

func main() { service.Main("admission", run) }

// run is the command: migrate, or serve until ctx ends.
func run(ctx context.Context, args []string) error {
	return service.Command("admission",
		func(args []string) (admission.Config, error) { return admission.ParseConfig(args, nil) },
		admission.Usage, admission.Run, admission.Migrate)(ctx, args)
}
