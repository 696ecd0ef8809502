package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthCommand asks each address's grpc.health.v1.Health/Check for the
// whole server, as a container health check or a start-up wait does. It
// sends no token: health is public on every toolcrib service.
func healthCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use: "health <host:port>...",
		Short: "print each service's grpc.health.v1 status (the whole server); " +
			"exits non-zero unless every one is SERVING (for container health checks)",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) == 0 {
				return fmt.Errorf("expected at least one <host:port>, got none")
			}
			var bad []string
			for _, addr := range args {
				st, err := healthOf(ctx, e, addr)
				if err != nil {
					msg := describe(err)
					if hint := e.tls.tlsMismatchHint(err); hint != "" {
						msg += "\n  " + hint
					}
					fmt.Fprintf(e.stdout, "%s\t%s\n", addr, msg)
					bad = append(bad, addr)
					continue
				}
				fmt.Fprintf(e.stdout, "%s\t%s\n", addr, st)
				if st != healthpb.HealthCheckResponse_SERVING {
					bad = append(bad, addr)
				}
			}
			if len(bad) > 0 {
				return fmt.Errorf("not serving: %s", strings.Join(bad, ", "))
			}
			return nil
		},
	}
}

func healthOf(ctx context.Context, e *env, addr string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	creds, err := e.tls.transport()
	if err != nil {
		return 0, err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	cctx, cancel := e.callCtx(ctx)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return 0, err
	}
	return resp.GetStatus(), nil
}
