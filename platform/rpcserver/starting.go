package rpcserver

import (
	"context"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolcrib/toolcrib/platform/apierror"
)

// ReasonStarting is the ErrorInfo reason of a call refused (UNAVAILABLE)
// because the service's start-up step ([Options.Ready], e.g. its
// migrations) has not finished: retry, or wait for the health status to be
// SERVING.
const ReasonStarting = "STARTING"

// startGate refuses every call but health and reflection until the
// start-up step has succeeded, so no handler runs against a schema that is
// not migrated yet. Without a start-up step it is open from the start.
type startGate struct{ open atomic.Bool }

// alwaysServed reports whether a method is answered while starting: the
// health service (which says NOT_SERVING) and server reflection.
func alwaysServed(fullMethod string) bool {
	svc, _, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	return svc == healthpb.Health_ServiceDesc.ServiceName || strings.HasPrefix(svc, "grpc.reflection.")
}

var errStarting = &apierror.Error{Code: codes.Unavailable, Reason: ReasonStarting,
	Message: "the service is starting (its start-up steps, such as migrations, have not finished); retry shortly"}

func (g *startGate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if !g.open.Load() && !alwaysServed(info.FullMethod) {
		return nil, errStarting
	}
	return h(ctx, req)
}

func (g *startGate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if !g.open.Load() && !alwaysServed(info.FullMethod) {
		return errStarting
	}
	return h(srv, ss)
}
