package rpcserver

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

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

// startGate holds back every call but health and reflection until the
// start-up step has succeeded, so no handler runs against a schema that is
// not migrated yet: a call that arrives earlier waits for it (at most wait,
// and never past its own deadline), then is refused with UNAVAILABLE
// [ReasonStarting]. Without a start-up step it is open from the start.
type startGate struct {
	open  atomic.Bool
	ready chan struct{} // closed when open becomes true
	wait  time.Duration
	// waiting counts the calls waiting for the gate now (tests wait on it
	// instead of guessing how long a call takes to arrive).
	waiting atomic.Int32
}

func newStartGate(open bool, wait time.Duration) *startGate {
	g := &startGate{ready: make(chan struct{}), wait: wait}
	if open {
		g.openUp()
	}
	return g
}

// openUp opens the gate; calls waiting in it proceed.
func (g *startGate) openUp() {
	if g.open.CompareAndSwap(false, true) {
		close(g.ready)
	}
}

// alwaysServed reports whether a method is answered while starting: the
// health service (which says NOT_SERVING) and server reflection.
func alwaysServed(fullMethod string) bool {
	svc, _, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	return svc == healthpb.Health_ServiceDesc.ServiceName || strings.HasPrefix(svc, "grpc.reflection.")
}

var errStarting = &apierror.Error{Code: codes.Unavailable, Reason: ReasonStarting,
	Message: "the service is starting (its start-up steps, such as migrations, have not finished); retry shortly"}

// admit returns nil once the gate is open, waiting for it as described at
// [startGate].
func (g *startGate) admit(ctx context.Context, fullMethod string) error {
	if g.open.Load() || alwaysServed(fullMethod) {
		return nil
	}
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case <-g.ready:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	return errStarting
}

func (g *startGate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := g.admit(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (g *startGate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := g.admit(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}
