package admissiontest

import (
	"context"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// BenchmarkCachedCheck and BenchmarkHealth are the two arms of
// TestBenchAdmission as Go benchmarks (allocations per call, profiles of
// one arm at a time): `go test -run '^$' -bench . -benchmem ./admissiontest/`.
func BenchmarkCachedCheck(b *testing.B) {
	a := Start(b, Options{Redis: true})
	conn := servicetest.Dial(b, a.Addr, a.Auth.User(b, User, Tenant))
	ac := admissionv1.NewAdmissionServiceClient(conn)
	req := &admissionv1.CheckRequest{ToolId: StatusTool, Generation: Generation, DescriptorDigest: StatusDigest,
		PolicyEpoch: Epoch, Arguments: []byte(`{"shipment_id":"S-1042"}`), Mode: admissionv1.Mode_MODE_AUTONOMOUS}
	b.SetParallelism(8) // 16 in flight on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := ac.Check(context.Background(), req)
			if err != nil || resp.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
				b.Fatalf("%v %v", err, resp.GetReason())
			}
		}
	})
}

func BenchmarkHealth(b *testing.B) {
	a := Start(b, Options{Redis: true})
	conn := servicetest.Dial(b, a.Addr, a.Auth.User(b, User, Tenant))
	hc := healthpb.NewHealthClient(conn)
	b.SetParallelism(8) // 16 in flight on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
