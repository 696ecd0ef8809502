package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/services/discovery/internal/scan"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
)

// translate keeps the codes, reasons and messages the per-RPC switches
// gave before it replaced them.
func TestTranslateKeepsCodesAndReasons(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("context: %w", err) }
	for _, c := range []struct {
		in     error
		code   codes.Code
		reason string
		msg    string
	}{
		{&store.NotFoundError{Kind: store.KindRun, ID: "r1"}, codes.NotFound, "NOT_FOUND", `run "r1" not found`},
		{wrap(&store.NotFoundError{Kind: store.KindGeneration, ID: store.GenerationID("s", "t.c", 3)}), codes.NotFound, "NOT_FOUND", `generation "s/t.c/3" not found`},
		{&store.NotFoundError{Kind: store.KindActivePointer, ID: store.PointerID("s", "t.c")}, codes.NotFound, "NOT_FOUND", `active pointer "s/t.c" not found`},
		{&scan.TriggerError{Err: scan.ErrUnknownServer, ServerID: "s"}, codes.NotFound, "NOT_FOUND", `server "s" not found`},
		{&scan.TriggerError{Err: scan.ErrUnknownClass, ServerID: "s", AudienceClass: "t.c"}, codes.NotFound, "NOT_FOUND", `audience class "t.c" not found`},
		{&scan.TriggerError{Err: scan.ErrNotCovered, ServerID: "s", AudienceClass: "t.c"}, codes.FailedPrecondition, "NOT_COVERED", "audience class t.c does not cover server s"},
		{movedError{}, codes.Aborted, "POINTER_MOVED", ""},
		{wrap(store.ErrCASConflict), codes.Aborted, "POINTER_MOVED", "the pointer is not at expected_generation; re-read it and retry"},
		{store.ErrClosed, codes.FailedPrecondition, "POINTER_CLOSED", ""},
		{store.ErrNotFresh, codes.FailedPrecondition, "GENERATION_EXPIRED", ""},
		{wrap(registryclient.ErrUnavailable), codes.Unavailable, "UNAVAILABLE", "the registry cannot be read; retry later"},
		{wrap(scan.ErrNotReady), codes.Unavailable, "UNAVAILABLE", "the scan queue is starting; retry later"},
		{errors.New("boom"), codes.Internal, "", "internal error"},
		{context.Canceled, codes.Canceled, "", ""},
	} {
		st := apierror.ToStatus(translate(c.in))
		reason := ""
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				reason = info.GetReason()
			}
		}
		if st.Code() != c.code || reason != c.reason || (c.msg != "" && st.Message() != c.msg) {
			t.Errorf("%v: %v %q %q, want %v %q %q", c.in, st.Code(), reason, st.Message(), c.code, c.reason, c.msg)
		}
	}
	// Request validation passes through unchanged.
	inv := apierror.InvalidArgument(apierror.FieldViolation{Field: "run_id", Description: "required"})
	if translate(inv) != error(inv) {
		t.Fatal("an apierror was rewritten")
	}
}

func TestRunAndScanIDs(t *testing.T) {
	var v apierror.Violations
	if id := checkRunID(&v, "run_id", "0B7A4C5E-9D7F-4A55-8F7E-1C2D3E4F5A6B"); len(v) != 0 || id != "0b7a4c5e-9d7f-4a55-8f7e-1c2d3e4f5a6b" {
		t.Fatalf("%q %v", id, v)
	}
	for _, bad := range []string{"", "x", "0b7a4c5e9d7f4a558f7e1c2d3e4f5a6b", "0b7a4c5e-9d7f-4a55-8f7e-1c2d3e4f5a6bz"} {
		var v apierror.Violations
		checkRunID(&v, "run_id", bad)
		if len(v) != 1 {
			t.Errorf("run id %q accepted", bad)
		}
	}
	for id, ok := range map[string]bool{"": true, "1": true, "123456789012345678": true, "0": false, "-1": false, "1e3": false, "12345678901234567890": false} {
		var v apierror.Violations
		checkScanID(&v, "scan_id", id)
		if (len(v) == 0) != ok {
			t.Errorf("scan id %q: %v", id, v)
		}
	}
}
