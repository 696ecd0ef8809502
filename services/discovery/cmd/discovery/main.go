// Command discovery runs toolcrib's discovery service.
//
// Usage:
//
//	discovery [flags]           serve (migrating first unless --migrate=false)
//	discovery migrate [flags]   apply the schema migrations and exit
//
// Every flag has an environment twin (TOOLCRIB_<FLAG>); `discovery -h` lists
// them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolcrib/toolcrib/services/discovery"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "discovery:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	migrate := len(args) > 0 && args[0] == "migrate"
	if migrate {
		args = args[1:]
	}
	cfg, err := discovery.ParseConfig(args, nil)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(os.Stdout, "Usage: discovery [migrate] [flags]\n\n"+discovery.Usage())
		return err
	}
	if err != nil {
		return err
	}
	if migrate {
		return discovery.Migrate(ctx, cfg)
	}
	return discovery.Run(ctx, cfg)
}
