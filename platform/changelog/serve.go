package changelog

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// ErrorInfo reasons of every Watch RPC (registry and discovery), shared by
// the servers that send them and the followers that act on them.
const (
	// ReasonCompacted (FAILED_PRECONDITION): the asked revision is no longer
	// kept. Re-list and watch from the revision the lists returned. The
	// ErrorInfo metadata carries `from_revision` and `oldest_revision`.
	ReasonCompacted = "REVISION_COMPACTED"
	// ReasonAhead (FAILED_PRECONDITION): the asked revision is past the
	// head (the service was restored from an older backup, or the client
	// followed another deployment). Re-list. Metadata: `head_revision`.
	ReasonAhead = "REVISION_AHEAD"
	// ReasonDraining (UNAVAILABLE): the server is shutting down. Resume
	// elsewhere (or after restart) from the last revision received.
	ReasonDraining = "DRAINING"
)

// Viewer is who a Watch stream is for: it sees every change when All, else
// only the changes appended for its Tenant.
type Viewer struct {
	// All is true for platform admins and toolcrib services.
	All bool
	// Tenant is the tenant whose changes a tenant principal sees.
	Tenant string
}

// ViewerOf returns the viewer of a verified principal: admins and services
// see every change, a tenant principal only its tenant's. A principal that
// is neither and has no tenant is PERMISSION_DENIED.
func ViewerOf(p principal.Principal) (Viewer, error) {
	switch {
	case p.Admin || p.Service:
		return Viewer{All: true}, nil
	case p.Tenant != "":
		return Viewer{Tenant: p.Tenant}, nil
	}
	return Viewer{}, apierror.PermissionDenied("watching needs a tenant, a platform admin or a toolcrib service principal")
}

// Sees reports whether v may receive e.
func (v Viewer) Sees(e Entry) bool {
	return v.All || (v.Tenant != "" && slices.Contains(e.Tenants, v.Tenant))
}

// Server is the server side of one service's Watch RPC, the same for every
// service; the service maps each entry to its own message.
//
// The contract it implements (documented in registry.proto and
// discovery.proto, checked by package watchtest):
//   - `from_revision` N > 0 sends every change with a revision > N in
//     revision order, without gaps, then each new one as it commits;
//     0 sends every change still kept, from the oldest. Negative is
//     INVALID_ARGUMENT.
//   - N older than the oldest kept change minus one: FAILED_PRECONDITION
//     [ReasonCompacted]; N past the head: FAILED_PRECONDITION [ReasonAhead].
//     A watcher that falls behind compaction while streaming gets
//     [ReasonCompacted] too.
//   - A heartbeat as soon as the backlog up to the head at connect time has
//     been sent, then one every [Server.Heartbeat], each carrying the head:
//     every change up to it that the viewer may see was sent.
//   - A viewer that is not [Viewer.All] receives only the changes appended
//     for its tenant; the revisions it receives skip the others, and its
//     heartbeats still carry the head, so it knows it is fresh up to the
//     head without seeing other tenants' changes.
//   - Drain ends every stream with UNAVAILABLE [ReasonDraining].
type Server struct {
	// Feed is the log served.
	Feed Feed
	// Heartbeat is the interval between heartbeats.
	Heartbeat time.Duration
	// Draining is closed when the server starts shutting down.
	Draining <-chan struct{}
	// Relist names what a client re-reads after [ReasonCompacted], for the
	// error message (e.g. "ListServers, ListAudienceClasses, ListTools,
	// GetPolicy").
	Relist string
}

// Serve runs one Watch stream for viewer from revision from, calling send
// for every event the viewer may see, until the client goes away (nil),
// the server drains or the log fails. Its errors are [apierror.Error]s
// ready for the gRPC boundary, except an internal failure, returned as
// such for the interceptor to log.
func (s *Server) Serve(ctx context.Context, v Viewer, from int64, send func(Event) error) error {
	if from < 0 {
		return apierror.InvalidArgument(apierror.FieldViolation{Field: "from_revision", Description: "must not be negative"})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	drained := make(chan struct{})
	go func() {
		select {
		case <-s.Draining:
			close(drained)
			cancel()
		case <-ctx.Done():
		}
	}()
	filtered := func(ev Event) error {
		if ev.Entry != nil && !v.Sees(*ev.Entry) {
			return nil
		}
		return send(ev)
	}
	var err error
	if from == 0 {
		err = s.serveOldest(ctx, filtered)
	} else {
		err = Watch(ctx, s.Feed, from, s.Heartbeat, filtered)
	}
	select {
	case <-drained:
		return &apierror.Error{Code: codes.Unavailable, Reason: ReasonDraining,
			Message: "the server is shutting down: resume the watch from the last revision received"}
	default:
	}
	switch {
	case errors.Is(err, ErrCompacted):
		oldest, oerr := s.Feed.Oldest(context.WithoutCancel(ctx))
		e := apierror.FailedPrecondition(ReasonCompacted, "the changes after revision "+strconv.FormatInt(from, 10)+
			" are no longer kept: re-list ("+s.Relist+") and watch from the revision the reads return")
		e.Metadata = map[string]string{"from_revision": strconv.FormatInt(from, 10)}
		if oerr == nil {
			e.Metadata["oldest_revision"] = strconv.FormatInt(oldest, 10)
		}
		return e
	case errors.Is(err, ErrAhead):
		head, herr := s.Feed.Head(context.WithoutCancel(ctx))
		e := apierror.FailedPrecondition(ReasonAhead, "revision "+strconv.FormatInt(from, 10)+
			" is ahead of this service's change log (restored from a backup?): re-list ("+s.Relist+") and watch from the revision the reads return")
		if herr == nil {
			e.Metadata = map[string]string{"head_revision": strconv.FormatInt(head, 10)}
		}
		return e
	case err == nil, ctx.Err() != nil:
		return nil // the client went away
	}
	return err
}

// serveOldest watches from the oldest change kept. Compaction between
// reading the oldest revision and reading the changes is not the client's
// fault: it is retried from the new oldest, as long as nothing was sent.
func (s *Server) serveOldest(ctx context.Context, send func(Event) error) error {
	for {
		oldest, err := s.Feed.Oldest(ctx)
		if err != nil {
			return err
		}
		sent := false
		err = Watch(ctx, s.Feed, oldest-1, s.Heartbeat, func(ev Event) error {
			sent = true
			return send(ev)
		})
		if !errors.Is(err, ErrCompacted) || sent {
			return err
		}
	}
}
