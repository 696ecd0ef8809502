// Command registry runs the toolcrib registry service.
//
// Usage:
//
//	registry [flags]          serve (migrating first unless --migrate=false)
//	registry migrate [flags]  run the database migrations and exit
//
// Every flag has an environment twin; `registry -h` lists them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolcrib/toolcrib/services/registry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "registry:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	migrate := len(args) > 0 && args[0] == "migrate"
	if migrate {
		args = args[1:]
	}
	cfg, err := registry.ParseConfig(args, nil)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(os.Stderr, "Usage: registry [migrate] [flags]\n\nFlags:\n"+registry.Usage())
		return err
	}
	if err != nil {
		return err
	}
	if migrate {
		return registry.Migrate(ctx, cfg)
	}
	return registry.Run(ctx, cfg)
}
