package grpcapi

import (
	"errors"
	"regexp"
	"strings"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/services/discovery/internal/scan"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
)

// ErrorInfo reasons of DiscoveryService errors (besides the generic
// NOT_FOUND, INVALID_ARGUMENT, …).
const (
	ReasonNotCovered        = "NOT_COVERED"
	ReasonPointerMoved      = "POINTER_MOVED"
	ReasonPointerClosed     = "POINTER_CLOSED"
	ReasonGenerationExpired = "GENERATION_EXPIRED"
)

// movedError says a tools page token names another generation than the
// pointer's current one.
type movedError struct{}

func (movedError) Error() string { return "the pointer moved since the page token was issued" }

// notFound is the answer for data the principal may not see: the same as
// for data that does not exist.
func notFound(kind, id string) error { return &store.NotFoundError{Kind: kind, ID: id} }

// translate turns the errors of the store, the scanner and the registry
// client into API errors; it is the one place that does. Anything else
// passes through: an [apierror.Error] (request validation) keeps its
// meaning, context errors theirs, and the rest becomes INTERNAL at the
// interceptor, which logs it.
func translate(err error) error {
	var (
		nf  *store.NotFoundError
		trg *scan.TriggerError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nf):
		return apierror.NotFound(nf.Kind, nf.ID)
	case errors.As(err, &trg):
		switch {
		case errors.Is(trg.Err, scan.ErrUnknownServer):
			return apierror.NotFound("server", trg.ServerID)
		case errors.Is(trg.Err, scan.ErrUnknownClass):
			return apierror.NotFound("audience class", trg.AudienceClass)
		default:
			return apierror.FailedPrecondition(ReasonNotCovered,
				"audience class "+apierror.Prefix(trg.AudienceClass)+" does not cover server "+apierror.Prefix(trg.ServerID))
		}
	case errors.As(err, new(movedError)):
		return apierror.Aborted(ReasonPointerMoved, "the pointer moved to another generation since the token was issued; read the new one from the start or use GetSnapshot")
	case errors.Is(err, store.ErrCASConflict):
		return apierror.Aborted(ReasonPointerMoved, "the pointer is not at expected_generation; re-read it and retry")
	case errors.Is(err, store.ErrClosed):
		return apierror.FailedPrecondition(ReasonPointerClosed, "the pointer is closed; a new proven scan reopens it")
	case errors.Is(err, store.ErrStaticListMoved):
		return apierror.Aborted(ReasonStaticListMoved, "the static tool list is not at expected_version; re-read it and retry")
	case errors.Is(err, store.ErrNotFresh):
		return apierror.FailedPrecondition(ReasonGenerationExpired, "the target generation is no longer fresh")
	case errors.Is(err, registryclient.ErrUnavailable):
		return apierror.Unavailable("the registry cannot be read; retry later", err)
	case errors.Is(err, scan.ErrNotReady):
		return apierror.Unavailable("the scan queue is starting; retry later", err)
	}
	return err
}

// Id forms. Run ids are UUIDs; scan ids are queue job numbers.
var (
	uuidPattern   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	scanIDPattern = regexp.MustCompile(`^[1-9][0-9]{0,18}$`)
)

// checkRunID checks a required discovery run id (a UUID) and returns it
// in canonical (lowercase) form.
func checkRunID(v *apierror.Violations, field, id string) string {
	switch {
	case id == "":
		v.Add(field, "required")
	case !uuidPattern.MatchString(id):
		v.Add(field, "must be a run id (a UUID)")
	}
	return strings.ToLower(id)
}

// checkScanID checks an optional scan id.
func checkScanID(v *apierror.Violations, field, id string) {
	if id != "" && !scanIDPattern.MatchString(id) {
		v.Add(field, "must be a scan id (a positive decimal number)")
	}
}
