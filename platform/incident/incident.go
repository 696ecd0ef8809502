package incident

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

// Sender is the one call a [Reporter] makes; a DiscoveryServiceClient
// whose connection carries the service token is one.
type Sender interface {
	ReportIncident(ctx context.Context, in *discoveryv1.ReportIncidentRequest) error
}

// Client is [Sender] over a DiscoveryServiceClient.
type Client struct {
	C discoveryv1.DiscoveryServiceClient
}

// ReportIncident implements [Sender].
func (c Client) ReportIncident(ctx context.Context, in *discoveryv1.ReportIncidentRequest) error {
	_, err := c.C.ReportIncident(ctx, in)
	return err
}

// QueueSize is how many reports may wait; more are dropped (and logged).
const QueueSize = 1024

// Reporter queues reports and sends them. Create it with [New]; run
// [Reporter.Run].
type Reporter struct {
	send  Sender
	lg    *slog.Logger
	queue chan *discoveryv1.ReportIncidentRequest
	// giveUp is how long one report is retried (a minute).
	giveUp time.Duration
}

// New returns a reporter sending with s.
func New(s Sender, lg *slog.Logger) *Reporter {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Reporter{send: s, lg: lg, queue: make(chan *discoveryv1.ReportIncidentRequest, QueueSize), giveUp: time.Minute}
}

// Report queues req; it never blocks: a report that does not fit is
// logged at error and dropped.
func (r *Reporter) Report(req *discoveryv1.ReportIncidentRequest) {
	select {
	case r.queue <- req:
	default:
		r.lg.Error("incident report queue full; report dropped", "event_id", req.GetEventId())
	}
}

// Run sends the queued reports until ctx ends, each retried with backoff
// until discovery stores it, refuses it (INVALID_ARGUMENT, NOT_FOUND,
// PERMISSION_DENIED, UNAUTHENTICATED: logged at error), or a minute
// passed.
func (r *Reporter) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case req := <-r.queue:
			r.deliver(ctx, req)
		}
	}
}

func (r *Reporter) deliver(ctx context.Context, req *discoveryv1.ReportIncidentRequest) {
	wait := 100 * time.Millisecond
	deadline := time.Now().Add(r.giveUp)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := r.send.ReportIncident(cctx, req)
		cancel()
		switch status.Code(err) {
		case codes.OK:
			return
		case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound:
			r.lg.ErrorContext(ctx, "discovery refused an incident report", "event_id", req.GetEventId(), "error", err)
			return
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			r.lg.ErrorContext(ctx, "incident report not delivered", "event_id", req.GetEventId(), "error", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}
