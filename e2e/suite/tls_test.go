package suite

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// TestTLSStackCheckAndLease runs the registry, discovery, admission and
// lease with TLS on every listener and mTLS between them, and no service
// token anywhere: each service is known to the others only by its SPIFFE
// client certificate. Admission follows the registry and discovery (Watch,
// a service call) and answers a Check ALLOW; the lease service reads the
// receipt from admission and follows the registry and discovery, and
// issues a lease that verifies. A plaintext client is refused; a
// certificate mapped to a service is that service without a token, and a
// tenant token on the same connection stays the tenant.
func TestTLSStackCheckAndLease(t *testing.T) {
	w := leaseworld.StartWith(t, leaseworld.Options{CacheTTL: time.Minute, TLS: true})
	pki := w.St.Auth.TLS
	allow := w.Allow(t, 1)
	iss, err := w.Issue(t, "alice", allow.GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatalf("Issue over mTLS: %v", err)
	}
	if v := w.Verify(t, iss); !v.GetValid() {
		t.Fatalf("Verify over mTLS: %v %s", v.GetFailure(), v.GetDetail())
	}
	if iss.GetClaims().GetSubject() != "alice" {
		t.Fatalf("lease subject %q", iss.GetClaims().GetSubject())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Every listener refuses a plaintext client.
	for name, addr := range map[string]string{"registry": w.St.RegistryAddr, "discovery": w.St.DiscoveryAddr,
		"admission": w.AdmissionAddr, "lease": w.LeaseAddr} {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		conn.Close()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: plaintext health check %v; want UNAVAILABLE", name, err)
		}
	}

	// TriggerScan needs an admin or a service.
	scan := func(service, token string) error {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(pki.ServiceTransport(t, service))}
		if token != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(principal.BearerToken(token)))
		}
		conn, err := grpc.NewClient(w.St.DiscoveryAddr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, err = discoveryv1.NewDiscoveryServiceClient(conn).TriggerScan(ctx,
			&discoveryv1.TriggerScanRequest{ServerId: leaseworld.ServerID, AudienceClass: leaseworld.Class})
		return err
	}
	if err := scan("lease", ""); err != nil {
		t.Fatalf("the lease service's certificate, no token: %v; want the service role", err)
	}
	alice := w.St.Auth.User(t, "alice", leaseworld.Tenant, "readers")
	if err := scan("lease", alice); status.Code(err) != codes.PermissionDenied ||
		!strings.Contains(err.Error(), "needs a platform admin or a toolcrib service") {
		t.Fatalf("alice's token over the lease service's certificate: %v; want PERMISSION_DENIED", err)
	}
	// A certificate of the CA whose SPIFFE ID is mapped to no role.
	if err := scan("not-a-service", ""); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("an unmapped certificate, no token: %v; want UNAUTHENTICATED", err)
	}
}
