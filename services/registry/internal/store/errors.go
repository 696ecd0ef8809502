package store

import (
	"fmt"

	"github.com/toolcrib/toolcrib/platform/apierror"
)

// NotFoundError says a named object does not exist.
type NotFoundError struct {
	// Kind is the object kind, e.g. `tool`.
	Kind string
	// ID names it.
	ID string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s %q not found", e.Kind, e.ID) }

// ExistsError says an object to create already exists.
type ExistsError struct {
	Kind string
	ID   string
}

func (e *ExistsError) Error() string { return fmt.Sprintf("%s %q already exists", e.Kind, e.ID) }

// StaleVersionError says a write named a version that is no longer the
// stored one (optimistic concurrency).
type StaleVersionError struct {
	Kind     string
	ID       string
	Expected int64
	Stored   int64
}

func (e *StaleVersionError) Error() string {
	return fmt.Sprintf("%s %q is at version %d, not %d: re-read it and retry", e.Kind, e.ID, e.Stored, e.Expected)
}

// InvalidError says the request is malformed; one violation per problem.
type InvalidError struct {
	Violations apierror.Violations
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid request: %d problems", len(e.Violations))
}

// PreconditionError says the records are not in the state the request
// needs. Reason is the ErrorInfo reason (e.g. APPROVAL_DIGEST_STALE).
type PreconditionError struct {
	Reason     string
	Message    string
	Violations apierror.Violations
}

func (e *PreconditionError) Error() string { return e.Reason + ": " + e.Message }

// PermissionError says the verified principal may not do this.
type PermissionError struct {
	Message string
}

func (e *PermissionError) Error() string { return e.Message }

// Reasons of an [EpochError].
const (
	// ReasonEpochNotReached: the tenant's policy epoch is still below the
	// one asked for.
	ReasonEpochNotReached = "EPOCH_NOT_REACHED"
	// ReasonEpochBeforeHistory: the epoch is from before the registry kept
	// the tenant's policy history (tenants that existed before migration 2).
	ReasonEpochBeforeHistory = "EPOCH_BEFORE_HISTORY"
)

// EpochError says a tenant's policy cannot be given at the epoch asked for.
type EpochError struct {
	// Reason is one of the Reason* constants.
	Reason string
	Tenant string
	// Epoch is the epoch asked for; Current the tenant's epoch; Since the
	// first epoch with history.
	Epoch, Current, Since int64
}

func (e *EpochError) Error() string {
	if e.Reason == ReasonEpochNotReached {
		return fmt.Sprintf("tenant %q is at policy epoch %d; epoch %d has not been reached", e.Tenant, e.Current, e.Epoch)
	}
	return fmt.Sprintf("the policy history of tenant %q starts at epoch %d; epoch %d is before it", e.Tenant, e.Since, e.Epoch)
}
