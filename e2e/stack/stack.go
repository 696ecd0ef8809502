// Package stack starts the implemented toolcrib services together for
// whole-suite tests and benchmarks: the real registry and the real discovery
// service, each through its own Run (as main and `toolcrib dev up` start
// them), on loopback port 0, sharing one fresh Postgres database (each in its
// own schema) and one throwaway identity provider.
package stack

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/registry"
)

// Stack is a running registry and discovery service.
type Stack struct {
	// Auth mints tokens the services accept.
	Auth *servicetest.Auth
	// PostgresURL is the shared test database.
	PostgresURL string
	// RegistryAddr and DiscoveryAddr are the gRPC addresses.
	RegistryAddr, DiscoveryAddr string
	// Registry and Discovery are clients presenting an admin token.
	Registry  registryv1.RegistryServiceClient
	Discovery discoveryv1.DiscoveryServiceClient
	// AdminConn is the admin connection to the registry, for more clients.
	AdminConn *grpc.ClientConn
}

// Options adjust the services' configuration before they start.
type Options struct {
	// Registry edits the registry's configuration; nil keeps the defaults.
	Registry func(*registry.Config)
	// Discovery edits the discovery configuration; nil keeps the defaults.
	Discovery func(*discovery.Config)
	// Auth is the identity provider of the services and their callers; nil
	// means a new [servicetest.NewAuth].
	Auth *servicetest.Auth
	// TLS runs the services with TLS on their listeners, mTLS between
	// them, and no service token: each knows the others by their SPIFFE
	// client certificates (servicetest.PKI, on Stack.Auth.TLS). The
	// Stack's clients and Auth.Start and Auth.Dial use TLS too.
	TLS bool
}

// ReserveAddr is [reserveAddr] for the worlds built on a stack (admission,
// which discovery's rollout guard asks, starts after discovery).
func ReserveAddr(t testing.TB) string { return reserveAddr(t) }

// reserveAddr picks a free loopback port for a service another service must
// know before it starts (the registry follows discovery, discovery reads
// the registry); the small window before the service binds it is
// acceptable in tests.
func reserveAddr(t testing.TB) string {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		// The kernel may hand a port just closed to the next listen on
		// port 0: never reserve one twice in this process.
		if _, dup := reserved.LoadOrStore(addr, true); !dup {
			return addr
		}
	}
}

// reserved are the addresses reserveAddr returned in this process.
var reserved sync.Map

// Start runs the registry and discovery until the test ends and waits until
// both are SERVING.
func Start(t testing.TB, opts Options) *Stack {
	t.Helper()
	url := pgtest.NewDatabase(t,
		pgtest.Schema{Name: "registry", Sets: registry.Migrations()},
		pgtest.Schema{Name: "discovery", Sets: discovery.Spec().Migrations})
	auth := opts.Auth
	if auth == nil {
		auth = servicetest.NewAuth(t)
	}
	if opts.TLS {
		auth.TLS = servicetest.NewPKI(t)
	}
	regAddr, discAddr := reserveAddr(t), reserveAddr(t)

	rcfg, err := registry.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	rcfg.DiscoveryAddr = discAddr
	rcfg.Egress.AllowLoopback = true // the fixtures listen on loopback
	if opts.Registry != nil {
		opts.Registry(&rcfg)
	}
	auth.Start(t, func(ctx context.Context, listening func(string)) error {
		rcfg.Common = auth.CommonAs(t, "registry", url, false, listening)
		rcfg.ListenAddr = regAddr
		return registry.Run(ctx, rcfg)
	})

	dcfg, err := discovery.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	dcfg.RegistryAddr = regAddr
	dcfg.Egress.AllowLoopback = true
	// No admission here: the rollout guard's missing-tool rule is off
	// unless a world sets the address of the admission it starts.
	dcfg.AdmissionAddr = ""
	if opts.Discovery != nil {
		opts.Discovery(&dcfg)
	}
	auth.Start(t, func(ctx context.Context, listening func(string)) error {
		dcfg.Common = auth.CommonAs(t, "discovery", url, false, listening)
		dcfg.ListenAddr = discAddr
		return discovery.Run(ctx, dcfg)
	})

	admin := auth.Admin(t)
	rconn := auth.Dial(t, regAddr, admin)
	return &Stack{
		Auth:          auth,
		PostgresURL:   url,
		RegistryAddr:  regAddr,
		DiscoveryAddr: discAddr,
		Registry:      registryv1.NewRegistryServiceClient(rconn),
		Discovery:     discoveryv1.NewDiscoveryServiceClient(auth.Dial(t, discAddr, admin)),
		AdminConn:     rconn,
	}
}
