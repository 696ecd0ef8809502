package rpcserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"

	"github.com/toolcrib/toolcrib/platform/principal"
)

// The access log names the caller: the verified principal's subject and
// tenant, never its token. The principal is known only after the
// authentication interceptor, which runs inside the logging one, so the
// outermost interceptor gives each call an empty slot, the innermost fills
// it from the principal, and the logger reads it when the call finishes.

type callerKey struct{}

type callerSlot struct {
	mu              sync.Mutex
	subject, tenant string
	known           bool
}

// maxCallerLen bounds a logged subject or tenant (they come from a token
// the identity provider signed, but a log line stays bounded anyway).
const maxCallerLen = 128

func bounded(s string) string {
	if len(s) <= maxCallerLen {
		return s
	}
	r := []rune(s[:maxCallerLen])
	return string(r[:len(r)-1]) + "…"
}

func withCallerSlot(ctx context.Context) context.Context {
	return context.WithValue(ctx, callerKey{}, &callerSlot{})
}

// noteCaller fills the call's slot from the verified principal, if any.
func noteCaller(ctx context.Context) {
	slot, _ := ctx.Value(callerKey{}).(*callerSlot)
	p, ok := principal.FromContext(ctx)
	if slot == nil || !ok {
		return
	}
	slot.mu.Lock()
	slot.subject, slot.tenant, slot.known = bounded(p.Subject), bounded(p.Tenant), true
	slot.mu.Unlock()
}

// callerFields are the access-log fields of the call's caller: none until
// (and unless) a principal was verified.
func callerFields(ctx context.Context) logging.Fields {
	var f logging.Fields
	if d, ok := ctx.Value(handlerTimeKey{}).(time.Duration); ok {
		f = logging.Fields{"grpc.handler_time_ms", fmt.Sprintf("%.3f", float64(d.Microseconds())/1000)}
	}
	slot, _ := ctx.Value(callerKey{}).(*callerSlot)
	if slot == nil {
		return f
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if !slot.known {
		return f
	}
	return append(logging.Fields{"caller.subject", slot.subject, "caller.tenant", slot.tenant}, f...)
}

func callerSlotUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(withCallerSlot(ctx), req)
}

func callerSlotStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &ctxStream{ServerStream: ss, ctx: withCallerSlot(ss.Context())})
}

func noteCallerUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	noteCaller(ctx)
	return h(ctx, req)
}

func noteCallerStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	noteCaller(ss.Context())
	return h(srv, ss)
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }
