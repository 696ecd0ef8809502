package apierror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestInvalidArgumentCarriesEveryViolation(t *testing.T) {
	var v Violations
	v.Add("contract.scope", "required")
	v.Add("contract.required_evidence[0]", "%q is not in allowed_fields", "x")
	st := ToStatus(v.Err())
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("code %v", st.Code())
	}
	var fields []string
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.BadRequest:
			for _, fv := range d.FieldViolations {
				fields = append(fields, fv.Field)
			}
		case *errdetails.ErrorInfo:
			info = d
		}
	}
	if fmt.Sprint(fields) != "[contract.required_evidence[0] contract.scope]" {
		t.Fatalf("field violations %v", fields)
	}
	if info == nil || info.Reason != "INVALID_ARGUMENT" || info.Domain != Domain {
		t.Fatalf("error info %v", info)
	}
	if (Violations{}).Err() != nil {
		t.Fatal("no violations must be no error")
	}
}

func TestInternalTextNeverReachesTheClient(t *testing.T) {
	var logged strings.Builder
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	icpt := UnaryServerInterceptor(logger)
	secret := errors.New("pq: password authentication failed for user admin at 10.0.0.5")
	_, err := icpt(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"},
		func(context.Context, any) (any, error) { return nil, fmt.Errorf("store: %w", secret) })
	st, _ := status.FromError(err)
	if st.Code() != codes.Internal || st.Message() != "internal error" {
		t.Fatalf("status %v %q", st.Code(), st.Message())
	}
	if !strings.Contains(logged.String(), "password authentication failed") {
		t.Fatal("the internal cause was not logged")
	}
	// A typed error keeps its code and safe message, and hides its cause.
	_, err = icpt(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"},
		func(context.Context, any) (any, error) { return nil, Unavailable("registry unreachable", secret) })
	st, _ = status.FromError(err)
	if st.Code() != codes.Unavailable || strings.Contains(st.Message(), "password") {
		t.Fatalf("status %v %q", st.Code(), st.Message())
	}
}

func TestContextErrorsKeepTheirMeaning(t *testing.T) {
	if c := ToStatus(fmt.Errorf("x: %w", context.DeadlineExceeded)).Code(); c != codes.DeadlineExceeded {
		t.Fatal(c)
	}
	if c := ToStatus(context.Canceled).Code(); c != codes.Canceled {
		t.Fatal(c)
	}
	if c := ToStatus(status.Error(codes.NotFound, "x")).Code(); c != codes.NotFound {
		t.Fatal(c)
	}
	if c := ToStatus(NotFound("server", "s1")).Code(); c != codes.NotFound {
		t.Fatal(c)
	}
	_ = io.EOF
}
