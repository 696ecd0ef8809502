package admissiontest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// TestBenchAdmissionCondition measures a cached Check admitted by a grant
// with a CEL condition (evaluated on every call, after the cache) side by
// side with the same Check admitted by a grant without one, at 16 in
// flight (DESIGN §9: ≥ 0.9). It prints
//
//	admission: condition in_flight=16 check_qps=… plain_qps=… ratio=…
func TestBenchAdmissionCondition(t *testing.T) {
	if os.Getenv("TOOLCRIB_BENCH") == "" {
		t.Skip("set TOOLCRIB_BENCH=1 (make bench-admission)")
	}
	d := 2 * time.Second
	if v, err := time.ParseDuration(os.Getenv("TOOLCRIB_BENCH_DURATION")); err == nil && v > 0 {
		d = v
	}
	const n = 16
	a := Start(t, Options{Redis: true})
	client := func(subject string, groups ...string) admissionv1.AdmissionServiceClient {
		return admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, a.Addr, a.Auth.User(t, subject, Tenant, groups...)))
	}
	cond, plain := client(ConditionalUser, ConditionalGroup), client(User)
	req := &admissionv1.CheckRequest{ToolId: StatusTool, Generation: Generation, DescriptorDigest: StatusDigest,
		PolicyEpoch: Epoch, Arguments: []byte(`{"shipment_id":"S-1042"}`), Mode: admissionv1.Mode_MODE_AUTONOMOUS}
	call := func(c admissionv1.AdmissionServiceClient, grant string) func(ctx context.Context, _ int) error {
		return func(ctx context.Context, _ int) error {
			resp, err := c.Check(ctx, req)
			switch {
			case err != nil:
			case resp.GetDecision() != admissionv1.Decision_DECISION_ALLOW:
				err = fmt.Errorf("%v: %s", resp.GetReason(), resp.GetDetail())
			case resp.GetReceipt().GetAdmittingGrant() != grant:
				err = fmt.Errorf("admitted by %q, want %q", resp.GetReceipt().GetAdmittingGrant(), grant)
			}
			return err
		}
	}
	check, base := call(cond, "group:"+ConditionalGroup), call(plain, "")
	for _, f := range []func(context.Context, int) error{check, base} {
		if err := f(context.Background(), 0); err != nil { // cached from here on
			t.Fatal(err)
		}
	}
	load(n, d/5, check)
	load(n, d/5, base)
	ca, pa := paired(n, d, check, base)
	if ca.errors > 0 || pa.errors > 0 {
		t.Fatalf("%d conditional and %d plain Checks failed", ca.errors, pa.errors)
	}
	fmt.Printf("admission: condition in_flight=%d check_qps=%.0f plain_qps=%.0f ratio=%.2f check_p99_ms=%.3f plain_p99_ms=%.3f\n",
		n, ca.qps, pa.qps, ca.qps/pa.qps, ms(ca.p99), ms(pa.p99))
}
