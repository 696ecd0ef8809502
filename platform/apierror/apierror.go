package apierror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
)

// Domain is the ErrorInfo domain of every toolcrib error.
const Domain = "toolcrib.dev"

// Error is a failure with a client-safe message. Err, when set, is the
// internal cause: logged, never sent.
type Error struct {
	// Code is the gRPC code sent to the client.
	Code codes.Code
	// Reason is the ErrorInfo reason, UPPER_SNAKE_CASE; empty for none.
	Reason string
	// Message is the client-safe message.
	Message string
	// Violations are BadRequest field violations (for InvalidArgument).
	Violations []FieldViolation
	// Metadata is added to ErrorInfo; never put secrets here.
	Metadata map[string]string
	// Err is the internal cause; never sent.
	Err error
}

// FieldViolation names one bad field of a request.
type FieldViolation struct {
	// Field is the path of the field, e.g. `contract.required_evidence[1]`.
	Field string
	// Description says what is wrong with it.
	Description string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Code.String())
	if e.Reason != "" {
		b.WriteString(" " + e.Reason)
	}
	b.WriteString(": " + e.Message)
	for _, v := range e.Violations {
		fmt.Fprintf(&b, "; %s: %s", v.Field, v.Description)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// GRPCStatus lets status.FromError and status.Code see the translated form.
func (e *Error) GRPCStatus() *status.Status { return e.status() }

// status is the wire form. Every text is bounded here too, as a backstop
// for a caller's input that reached a message unbounded.
func (e *Error) status() *status.Status {
	st := status.New(e.Code, bound(e.Message, MaxMessage))
	var details []protoadapt.MessageV1
	if e.Reason != "" {
		var md map[string]string
		if len(e.Metadata) > 0 {
			md = make(map[string]string, len(e.Metadata))
			for k, v := range e.Metadata {
				md[bound(k, MaxEcho)] = bound(v, MaxMessage)
			}
		}
		details = append(details, &errdetails.ErrorInfo{Reason: e.Reason, Domain: Domain, Metadata: md})
	}
	if len(e.Violations) > 0 {
		br := &errdetails.BadRequest{}
		for i, v := range e.Violations {
			if i == maxViolations {
				break
			}
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
				Field: bound(v.Field, MaxMessage), Description: bound(v.Description, MaxMessage)})
		}
		details = append(details, br)
	}
	if len(details) == 0 {
		return st
	}
	withDetails, err := st.WithDetails(details...)
	if err != nil {
		return st
	}
	return withDetails
}

// InvalidArgument reports a malformed request, one violation per problem.
func InvalidArgument(violations ...FieldViolation) *Error {
	msg := "invalid request"
	if len(violations) == 1 {
		msg = "invalid " + violations[0].Field + ": " + violations[0].Description
	} else if len(violations) > 1 {
		msg = fmt.Sprintf("invalid request: %d problems", len(violations))
	}
	return &Error{Code: codes.InvalidArgument, Reason: "INVALID_ARGUMENT", Message: msg, Violations: violations}
}

// NotFound reports that a named object does not exist. The id is echoed
// only as a bounded prefix ([Prefix]).
func NotFound(kind, id string) *Error {
	return &Error{Code: codes.NotFound, Reason: "NOT_FOUND", Message: fmt.Sprintf("%s %s not found", kind, Echo(id)),
		Metadata: map[string]string{"kind": kind, "id": Prefix(id)}}
}

// AlreadyExists reports that an object with that id exists. The id is
// echoed only as a bounded prefix.
func AlreadyExists(kind, id string) *Error {
	return &Error{Code: codes.AlreadyExists, Reason: "ALREADY_EXISTS", Message: fmt.Sprintf("%s %s already exists", kind, Echo(id)),
		Metadata: map[string]string{"kind": kind, "id": Prefix(id)}}
}

// FailedPrecondition reports that the system is not in the state the
// request needs; reason says which state.
func FailedPrecondition(reason, message string) *Error {
	return &Error{Code: codes.FailedPrecondition, Reason: reason, Message: message}
}

// Aborted reports a lost optimistic-concurrency race: re-read and retry.
func Aborted(reason, message string) *Error {
	return &Error{Code: codes.Aborted, Reason: reason, Message: message}
}

// PermissionDenied reports a verified principal that may not do this.
func PermissionDenied(message string) *Error {
	return &Error{Code: codes.PermissionDenied, Reason: "PERMISSION_DENIED", Message: message}
}

// Unauthenticated reports a missing or invalid credential.
func Unauthenticated(message string) *Error {
	return &Error{Code: codes.Unauthenticated, Reason: "UNAUTHENTICATED", Message: message}
}

// Unavailable reports a dependency that cannot be reached; retry later.
func Unavailable(message string, cause error) *Error {
	return &Error{Code: codes.Unavailable, Reason: "UNAVAILABLE", Message: message, Err: cause}
}

// Violations collects field violations while validating a request.
type Violations []FieldViolation

// Add records one violation.
func (v *Violations) Add(field, format string, args ...any) {
	*v = append(*v, FieldViolation{Field: field, Description: fmt.Sprintf(format, args...)})
}

// Err returns an InvalidArgument error with every violation, or nil.
func (v Violations) Err() error {
	if len(v) == 0 {
		return nil
	}
	sorted := append([]FieldViolation(nil), v...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Field < sorted[j].Field })
	return InvalidArgument(sorted...)
}

// ToStatus translates any error into the status sent to a client. Errors
// that are not [*Error] or a gRPC status become Internal with a generic
// message; context errors keep their meaning.
func ToStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae.status()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, "request canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, "deadline exceeded")
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	return status.New(codes.Internal, "internal error")
}

// internal reports whether err would be sent as a generic Internal error,
// i.e. its text must be logged because the client will not see it.
func internal(err error) bool {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Err != nil || ae.Code == codes.Internal
	}
	_, ok := status.FromError(err)
	return !ok && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// UnaryServerInterceptor translates handler errors with [ToStatus], logging
// the internal cause of errors whose text the client does not see.
func UnaryServerInterceptor(logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			return nil, translate(ctx, logger, info.FullMethod, err)
		}
		return resp, nil
	}
}

// StreamServerInterceptor is the streaming form of [UnaryServerInterceptor].
func StreamServerInterceptor(logger *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := handler(srv, ss); err != nil {
			return translate(ss.Context(), logger, info.FullMethod, err)
		}
		return nil
	}
}

func translate(ctx context.Context, logger *slog.Logger, method string, err error) error {
	if internal(err) {
		// The cause may quote the request (a driver error naming the bad
		// value): log a bounded prefix of it.
		logger.ErrorContext(ctx, "request failed", "method", method, "error", bound(err.Error(), MaxLogged))
	}
	return ToStatus(err).Err()
}
