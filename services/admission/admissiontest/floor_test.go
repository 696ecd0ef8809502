package admissiontest

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
)

// floorMethod is the bench-only floor of Check: registered by
// [TestBenchAdmission] on the same server as AdmissionService (through
// [Options.Register]), so it runs behind the same interceptors (caller
// slot, access log, metrics, recovery, error translation, token
// verification), decodes the same CheckRequest and answers a CheckResponse
// of the same size, with no work between the two. It exists only in this
// test binary.
const (
	floorService = "toolcrib.bench.v1.CheckFloor"
	floorMethod  = "/" + floorService + "/Check"
)

// checkFloor answers every request with resp, a CheckResponse the real
// Check answered for the same request (set before the first call).
type checkFloor struct {
	resp atomic.Pointer[admissionv1.CheckResponse]
}

func (f *checkFloor) check(context.Context, *admissionv1.CheckRequest) (*admissionv1.CheckResponse, error) {
	return f.resp.Load(), nil
}

// register adds the floor to s the way generated code adds a service: the
// request decoded by the server, then the interceptor chain, then the
// handler.
func (f *checkFloor) register(s *grpc.Server) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: floorService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Check", Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(admissionv1.CheckRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				return srv.(*checkFloor).check(ctx, req.(*admissionv1.CheckRequest))
			}
			if interceptor == nil {
				return h(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: floorMethod}, h)
		}}},
	}, f)
}

// call is the client side: the same connection, request and response type
// as a Check.
func (f *checkFloor) call(conn grpc.ClientConnInterface, req *admissionv1.CheckRequest) func(ctx context.Context, _ int) error {
	return func(ctx context.Context, _ int) error {
		return conn.Invoke(ctx, floorMethod, req, new(admissionv1.CheckResponse))
	}
}
