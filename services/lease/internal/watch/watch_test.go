package watch

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolcrib/toolcrib/services/lease/admissionview"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// TestStaleStreamsFailClosed: with the registry and discovery unreachable
// the streams never send a heartbeat, so Check refuses with ErrStale
// (never Current), before and after the followers tried.
func TestStaleStreamsFailClosed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	v := New(Options{Registry: registryv1.NewRegistryServiceClient(conn), Discovery: discoveryv1.NewDiscoveryServiceClient(conn),
		Window: time.Second, MinBackoff: 10 * time.Millisecond})
	b := admissionview.Binding{Tenant: "acme", Server: "inventory", AudienceClass: "acme.readers", Tool: "inventory.reserve",
		DescriptorDigest: "sha256:d", Generation: 1, PolicyEpoch: 1}
	if _, err := v.Check(context.Background(), b); !errors.Is(err, admissionview.ErrStale) {
		t.Fatalf("before Run: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = v.Run(ctx); close(done) }()
	time.Sleep(300 * time.Millisecond)
	if _, err := v.Check(context.Background(), b); !errors.Is(err, admissionview.ErrStale) {
		t.Fatalf("following unreachable streams: %v", err)
	}
	if ok, why := v.Fresh(); ok || why == "" {
		t.Fatalf("Fresh() = %v %q", ok, why)
	}
	cancel()
	<-done
}
