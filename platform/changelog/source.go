package changelog

import (
	"context"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// StreamError maps a Watch RPC error to the package's errors: [ErrCompacted]
// for FAILED_PRECONDITION [ReasonCompacted], [ErrAhead] for
// [ReasonAhead], [ErrDraining] for UNAVAILABLE [ReasonDraining]; any other
// error is returned unchanged.
func StreamError(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}
	reason := ""
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.GetReason()
		}
	}
	switch {
	case st.Code() == codes.FailedPrecondition && reason == ReasonCompacted:
		return fmt.Errorf("%w: %s", ErrCompacted, st.Message())
	case st.Code() == codes.FailedPrecondition && reason == ReasonAhead:
		return fmt.Errorf("%w: %s", ErrAhead, st.Message())
	case st.Code() == codes.Unavailable && reason == ReasonDraining:
		return fmt.Errorf("%w: %s", ErrDraining, st.Message())
	}
	return err
}

// RegistrySource is the [Source] of RegistryService.Watch through c.
func RegistrySource(c registryv1.RegistryServiceClient) Source[*registryv1.Change] {
	return registrySource{c}
}

type registrySource struct {
	c registryv1.RegistryServiceClient
}

func (s registrySource) Watch(ctx context.Context, from int64) (Stream[*registryv1.Change], error) {
	st, err := s.c.Watch(ctx, &registryv1.WatchRequest{FromRevision: from})
	if err != nil {
		return nil, StreamError(err)
	}
	return grpcStream[*registryv1.WatchResponse, *registryv1.Change]{recv: st.Recv, split: func(r *registryv1.WatchResponse) (*registryv1.Change, *catalogv1.Heartbeat) {
		return r.GetChange(), r.GetHeartbeat()
	}, rev: (*registryv1.Change).GetRevision}, nil
}

// DiscoverySource is the [Source] of DiscoveryService.Watch through c.
func DiscoverySource(c discoveryv1.DiscoveryServiceClient) Source[*discoveryv1.PointerChange] {
	return discoverySource{c}
}

type discoverySource struct {
	c discoveryv1.DiscoveryServiceClient
}

func (s discoverySource) Watch(ctx context.Context, from int64) (Stream[*discoveryv1.PointerChange], error) {
	st, err := s.c.Watch(ctx, &discoveryv1.WatchRequest{FromRevision: from})
	if err != nil {
		return nil, StreamError(err)
	}
	return grpcStream[*discoveryv1.WatchResponse, *discoveryv1.PointerChange]{recv: st.Recv, split: func(r *discoveryv1.WatchResponse) (*discoveryv1.PointerChange, *catalogv1.Heartbeat) {
		return r.GetChange(), r.GetHeartbeat()
	}, rev: (*discoveryv1.PointerChange).GetRevision}, nil
}

// grpcStream adapts a gRPC Watch stream whose responses are a change or a
// heartbeat.
type grpcStream[R any, C comparable] struct {
	recv  func() (R, error)
	split func(R) (C, *catalogv1.Heartbeat)
	rev   func(C) int64
}

func (g grpcStream[R, C]) Recv() (Message[C], error) {
	for {
		r, err := g.recv()
		if err != nil {
			return Message[C]{}, StreamError(err)
		}
		ch, hb := g.split(r)
		var zero C
		switch {
		case hb != nil:
			return Message[C]{Revision: hb.GetRevision(), Heartbeat: true}, nil
		case ch != zero:
			return Message[C]{Change: ch, Revision: g.rev(ch)}, nil
		}
		// An event of a kind this client does not know (a newer server):
		// skip it.
	}
}
