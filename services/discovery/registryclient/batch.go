package registryclient

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/discovery/internal/coalesce"
)

// Coalescing. A fleet's scans each read their binding twice (at the start
// and in the closing re-check) and pin a new server's identity once; with
// dozens of workers these calls come at the same moment. [Client.Binding]
// and [Client.PinIdentity] therefore queue theirs, and the calls queued
// while earlier ones are on the wire go together in one GetBindings or
// PinIdentities call (see package coalesce). Each call still gets exactly
// its own answer: a binding read in one snapshot, started after the caller
// asked (so a closing re-check still reads what was committed
// before it asked), and a pin decided by the version the caller read.

// newCoalescer is a coalescer of calls to the registry: at most 256 (the
// registry's limit) in a batch, one batch at once (the next forms while it
// is on the wire), 30 s per batch. Each batch costs the registry a
// transaction of its own (a pin batch: its update, its change-log append
// and its read), and with two in flight a fleet's calls, spread over the
// crawl, went in batches of one or two (issue 27: 800 first scans made 514
// PinIdentities and 850 GetBindings calls). One in flight makes the
// batches larger; in the 800-server crawl the Postgres backends' CPU went
// 2.96/2.94/3.12 -> 2.57/2.78/2.63 s (interleaved, 06:25 UTC) at the same
// wall time. A caller waits at most for the batch on the wire, one
// registry round trip.
func newCoalescer[Q, R any](send func(context.Context, []Q) ([]R, error)) *coalesce.Coalescer[Q, R] {
	return &coalesce.Coalescer[Q, R]{Send: send, Max: 256, InFlight: 1, Timeout: 30 * time.Second}
}

// bindingAnswer is one pair's answer of a GetBindings call.
type bindingAnswer struct {
	b   Binding
	err error
}

// sendBindings reads pairs with one GetBindings call; a registry without
// it (UNIMPLEMENTED) is read pair by pair.
func (c *Client) sendBindings(ctx context.Context, reads []*registryv1.GetBindingRequest) ([]bindingAnswer, error) {
	out := make([]bindingAnswer, len(reads))
	r, err := c.rpc.GetBindings(ctx, &registryv1.GetBindingsRequest{Reads: reads})
	if status.Code(err) == codes.Unimplemented {
		for i, q := range reads {
			out[i].b, out[i].err = c.binding(ctx, q)
		}
		return out, nil
	}
	if err != nil {
		return nil, translate(err)
	}
	if len(r.GetResults()) != len(reads) {
		return nil, fmt.Errorf("%w: GetBindings answered %d of %d reads", ErrUnavailable, len(r.GetResults()), len(reads))
	}
	for i, res := range r.GetResults() {
		if kind := res.GetNotFound(); kind != "" {
			out[i].err = fmt.Errorf("%w: %s %q not found", ErrNotFound, kind, notFoundID(kind, reads[i]))
			continue
		}
		out[i].b = bindingOf(res.GetBinding())
	}
	return out, nil
}

func notFoundID(kind string, q *registryv1.GetBindingRequest) string {
	if kind == "server" {
		return q.GetServerId()
	}
	return q.GetAudienceClass()
}

// pinAnswer is one pin's answer of a PinIdentities call.
type pinAnswer struct {
	s   *registryv1.Server
	err error
}

// sendPins sets pins with one PinIdentities call; a registry without it
// (UNIMPLEMENTED) gets one UpdateServer per pin.
func (c *Client) sendPins(ctx context.Context, pins []pinRequest) ([]pinAnswer, error) {
	out := make([]pinAnswer, len(pins))
	req := &registryv1.PinIdentitiesRequest{Pins: make([]*registryv1.IdentityPin, len(pins))}
	for i, p := range pins {
		req.Pins[i] = &registryv1.IdentityPin{ServerId: p.server.GetServerId(), ExpectedVersion: p.server.GetVersion(), IdentityPin: p.pin}
	}
	r, err := c.rpc.PinIdentities(ctx, req)
	if status.Code(err) == codes.Unimplemented {
		for i, p := range pins {
			out[i].s, out[i].err = c.updatePin(ctx, p.server, p.pin)
		}
		return out, nil
	}
	if err != nil {
		return nil, translate(err)
	}
	if len(r.GetResults()) != len(pins) {
		return nil, fmt.Errorf("%w: PinIdentities answered %d of %d pins", ErrUnavailable, len(r.GetResults()), len(pins))
	}
	for i, res := range r.GetResults() {
		id := pins[i].server.GetServerId()
		switch res.GetOutcome() {
		case registryv1.PinOutcome_PIN_OUTCOME_PINNED:
			out[i].s = res.GetServer()
		case registryv1.PinOutcome_PIN_OUTCOME_NOT_FOUND:
			out[i].err = fmt.Errorf("%w: server %q not found", ErrNotFound, id)
		case registryv1.PinOutcome_PIN_OUTCOME_VERSION_MISMATCH, registryv1.PinOutcome_PIN_OUTCOME_ALREADY_PINNED:
			out[i].err = fmt.Errorf("%w: server %q (%s)", ErrConflict, id, res.GetOutcome())
		default:
			out[i].err = fmt.Errorf("%w: server %q: unknown pin outcome %d", ErrUnavailable, id, res.GetOutcome())
		}
	}
	return out, nil
}

// pinRequest is one queued pin: the server as read (with an empty pin) and
// the pin to set.
type pinRequest struct {
	server *registryv1.Server
	pin    string
}
