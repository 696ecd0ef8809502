package apierror_test

import (
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/platform/apierror"
)

func TestEchoesAreBounded(t *testing.T) {
	huge := strings.Repeat("é", 2<<20) // 4 MiB, multi-byte runes
	if p := apierror.Prefix(huge); len(p) > apierror.MaxEcho+32 || !strings.HasPrefix(p, "é") || !strings.Contains(p, "4194304 bytes") {
		t.Fatalf("Prefix: %d bytes %q", len(p), p[:40])
	}
	if e := apierror.Echo("a\x1b[2Jb\n"); e != `"a\x1b[2Jb\n"` {
		t.Fatalf("Echo escapes: %s", e)
	}
	st := status.Convert(apierror.NotFound("run", huge))
	if len(st.Message()) > 200 {
		t.Fatalf("NotFound message is %d bytes", len(st.Message()))
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && len(info.GetMetadata()["id"]) > apierror.MaxEcho+32 {
			t.Fatalf("metadata id is %d bytes", len(info.GetMetadata()["id"]))
		}
	}
	// The backstop: a message built from raw input is still bounded.
	raw := &apierror.Error{Code: 3, Reason: "X", Message: huge, Metadata: map[string]string{"v": huge},
		Violations: []apierror.FieldViolation{{Field: "f", Description: huge}}}
	st = status.Convert(raw)
	total := len(st.Message())
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			total += len(d.GetMetadata()["v"])
		case *errdetails.BadRequest:
			total += len(d.GetFieldViolations()[0].GetDescription())
		}
	}
	if total > 3*(apierror.MaxMessage+32) {
		t.Fatalf("the status carries %d bytes of input", total)
	}
}
