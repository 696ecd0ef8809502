package store

import (
	"fmt"
	"strconv"
)

// NotFoundError says a named run, pointer or generation does not exist.
// It matches [ErrNotFound] with errors.Is.
type NotFoundError struct {
	// Kind is the object kind: `run`, `active pointer` or `generation`.
	Kind string
	// ID names it: a run id, `server/class` or `server/class/generation`.
	ID string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("store: %s %q not found", e.Kind, e.ID) }

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// Kinds of [NotFoundError].
const (
	KindRun           = "run"
	KindActivePointer = "active pointer"
	KindGeneration    = "generation"
)

// PointerID names a pointer in a [NotFoundError].
func PointerID(serverID, audienceClass string) string { return serverID + "/" + audienceClass }

// GenerationID names a generation in a [NotFoundError].
func GenerationID(serverID, audienceClass string, generation int64) string {
	return serverID + "/" + audienceClass + "/" + strconv.FormatInt(generation, 10)
}
