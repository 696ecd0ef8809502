// Package servicetest starts toolcrib services in-process for tests, the way
// main and the dev launcher do (their Run functions on a loopback port 0),
// and gives tests the credentials to call them: a throwaway signing key, its
// JWKS and tokens for admins, services and tenants.
package servicetest

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/redistest"
)

// Issuer and Audience are the claims test tokens carry and test services
// require.
const (
	Issuer       = "toolcrib-test"
	Audience     = "toolcrib"
	AdminGroup   = "toolcrib-admins"
	ServiceGroup = "toolcrib-services"
	// ConfirmerGroup is the confirmer group of the services under test
	// (config.DefaultConfirmerGroup).
	ConfirmerGroup = config.DefaultConfirmerGroup
	// PlatformTenant is the tenant of admin and service tokens; the admin
	// and service groups count only there.
	PlatformTenant = "toolcrib-platform"
)

// Auth is a throwaway identity provider for one test.
type Auth struct {
	Signer   *principal.Signer
	JWKSPath string
	dir      string
	// Provider, when set, issues every token and the services find its keys
	// by OpenID Connect discovery ([NewOIDCAuth]).
	Provider Provider
	// otherIssuers are trusted beside Provider ([NewOIDCAuth]).
	otherIssuers []principal.Issuer
	// TLS, when set, runs services started through [Auth.CommonAs] under
	// it, and [Auth.Start] and [Auth.Dial] reach them over TLS.
	TLS *PKI
}

// NewAuth creates a signing key and its JWKS in a temporary directory.
func NewAuth(t testing.TB) *Auth {
	t.Helper()
	dir := t.TempDir()
	files, err := principal.EnsureDevKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := principal.LoadSigner(files.SigningKey, Issuer, Audience)
	if err != nil {
		t.Fatal(err)
	}
	return &Auth{Signer: s, JWKSPath: files.JWKS, dir: dir}
}

// Token mints a token with the given claims.
func (a *Auth) Token(t testing.TB, c principal.Claims) string {
	t.Helper()
	if a.Provider != nil {
		return a.providerToken(t, c)
	}
	tok, err := a.Signer.Mint(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Admin mints a platform-admin token: the admin group in the platform
// tenant.
func (a *Auth) Admin(t testing.TB) string {
	return a.Token(t, principal.Claims{Subject: "test-admin", Tenant: PlatformTenant, Groups: []string{AdminGroup}})
}

// Service mints a toolcrib-service token: the service group in the
// platform tenant.
func (a *Auth) Service(t testing.TB) string {
	return a.Token(t, principal.Claims{Subject: "test-service", Tenant: PlatformTenant, Groups: []string{ServiceGroup}})
}

// Confirmer mints a confirmer token: the confirmer group in the platform
// tenant (what the gateway presents beside a user's token when the user
// confirmed a call).
func (a *Auth) Confirmer(t testing.TB) string {
	return a.Token(t, principal.Claims{Subject: "test-confirmer", Tenant: PlatformTenant, Groups: []string{ConfirmerGroup}})
}

// User mints a token for subject in tenant with groups.
func (a *Auth) User(t testing.TB, subject, tenant string, groups ...string) string {
	return a.Token(t, principal.Claims{Subject: subject, Tenant: tenant, Groups: groups})
}

// Common returns the shared configuration for a service under test: loopback
// port 0, no metrics listener, the given database, a fresh Redis prefix when
// redis is true, this Auth's keys, a service token file, fast health checks
// and a short drain. listening receives the gRPC address.
func (a *Auth) Common(t testing.TB, postgresURL string, redis bool, listening func(string)) config.Common {
	t.Helper()
	tokenFile := filepath.Join(a.dir, "service-token")
	if _, err := os.Stat(tokenFile); err != nil {
		if err := os.WriteFile(tokenFile, []byte(a.Service(t)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := config.Common{
		ListenAddr:              "127.0.0.1:0",
		PostgresURL:             postgresURL,
		LogLevel:                slog.LevelWarn,
		LogFormat:               "text",
		ShutdownTimeout:         2 * time.Second,
		Migrate:                 true,
		AuthJWKS:                a.JWKSPath,
		AuthIssuer:              Issuer,
		AuthAudience:            Audience,
		AuthPlatformTenant:      PlatformTenant,
		AuthMaxTokenLifetime:    principal.DefaultMaxTokenLifetime,
		AdminGroup:              AdminGroup,
		ServiceGroup:            ServiceGroup,
		ConfirmerGroup:          ConfirmerGroup,
		DependencyCheckInterval: 100 * time.Millisecond,
		ServiceTokenFile:        tokenFile,
		Listening:               listening,
	}
	if a.Provider != nil {
		a.useProvider(t, &c)
	}
	if redis {
		c.RedisURL = "redis://" + redistest.Addr()
		c.RedisPrefix = redistest.NewPrefix(t)
	}
	if os.Getenv("TOOLCRIB_TEST_LOG") != "" {
		c.LogLevel = slog.LevelDebug
	}
	return c
}

// Start runs a service's Run in the background and returns its gRPC address
// once its health status is SERVING. The service is stopped (its context
// cancelled, its drain awaited) when the test ends; an error from Run fails
// the test.
func Start(t testing.TB, run func(ctx context.Context, listening func(string)) error) string {
	t.Helper()
	return start(t, insecure.NewCredentials(), run)
}

func start(t testing.TB, creds credentials.TransportCredentials, run func(ctx context.Context, listening func(string)) error) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, func(a string) { addrc <- a }) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		cancel()
		t.Fatalf("service exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("service did not listen within 30s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("service stopped with error: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("service did not stop within 30s of cancellation")
		}
	})
	waitServing(t, creds, addr, 30*time.Second)
	return addr
}

// WaitServing polls the overall health status of addr until it is SERVING.
func WaitServing(t testing.TB, addr string, within time.Duration) {
	t.Helper()
	waitServing(t, insecure.NewCredentials(), addr, within)
}

func waitServing(t testing.TB, creds credentials.TransportCredentials, addr string, within time.Duration) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not SERVING within %v (last: %v %v)", addr, within, resp.GetStatus(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Dial returns a client connection to addr that sends token (if not empty);
// closed when the test ends.
func Dial(t testing.TB, addr, token string) *grpc.ClientConn {
	t.Helper()
	return dial(t, insecure.NewCredentials(), addr, token)
}

func dial(t testing.TB, creds credentials.TransportCredentials, addr, token string) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(principal.BearerToken(token)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
