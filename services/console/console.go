package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/services/console/internal/session"
	"github.com/toolcrib/toolcrib/services/console/internal/signin"
	"github.com/toolcrib/toolcrib/services/console/internal/web"
)

// Schema is the console's Postgres schema. It holds no table (browser
// sessions are in Redis); Postgres is a health dependency only because
// every service shares one start-up (platform/service).
const Schema = "console"

// Migrations are the console's migration sets: none.
func Migrations() []postgres.Set { return nil }

func spec() service.Spec {
	return service.Spec{Name: "console", Schema: Schema, Migrations: Migrations(), UsesRedis: true, HealthNames: []string{HealthName}}
}

// Run serves the console until ctx ends (nil after a clean stop): the pages
// on HTTPListen, gRPC health and metrics as every service.
func Run(ctx context.Context, cfg Config) error {
	return service.Run(ctx, spec(), cfg.Common, func(ctx context.Context, d *service.Deps) (service.Parts, error) {
		var conns []*grpc.ClientConn
		closeConns := func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}
		// No service token: every call carries the user's token
		// (grpc.PerRPCCredentials per call), so the console can do nothing
		// its user could not.
		dial := func(addr string) (*grpc.ClientConn, error) {
			c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(d.Transport))
			if err == nil {
				conns = append(conns, c)
			}
			return c, err
		}
		rconn, err1 := dial(cfg.RegistryAddr)
		dconn, err2 := dial(cfg.DiscoveryAddr)
		aconn, err3 := dial(cfg.AdmissionAddr)
		if err := errors.Join(err1, err2, err3); err != nil {
			closeConns()
			return service.Parts{}, fmt.Errorf("clients: %w", err)
		}
		lis, err := net.Listen("tcp", cfg.HTTPListen)
		if err != nil {
			closeConns()
			return service.Parts{}, fmt.Errorf("listen %s: %w", cfg.HTTPListen, err)
		}
		base := cfg.baseURL(lis.Addr().String())
		var oidc *signin.Client
		if cfg.OIDCIssuer != "" {
			secret := ""
			if cfg.OIDCClientSecretFile != "" {
				b, err := os.ReadFile(cfg.OIDCClientSecretFile)
				if err != nil {
					_ = lis.Close()
					closeConns()
					return service.Parts{}, fmt.Errorf("--oidc-client-secret-file: %w", err)
				}
				secret = strings.TrimSpace(string(b))
			}
			oidc, err = signin.New(ctx, signin.Options{Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID, ClientSecret: secret,
				RedirectURL: strings.TrimSuffix(base, "/") + "/signin/callback", Scopes: strings.Fields(cfg.OIDCScopes), TokenField: cfg.OIDCTokenField})
			if err != nil {
				_ = lis.Close()
				closeConns()
				return service.Parts{}, fmt.Errorf("--oidc-issuer: %w", err)
			}
		}
		h, err := web.New(web.Options{
			Registry:  registryv1.NewRegistryServiceClient(rconn),
			Discovery: discoveryv1.NewDiscoveryServiceClient(dconn),
			Admission: admissionv1.NewAdmissionServiceClient(aconn),
			Verifier:  d.Verifier, Sessions: session.New(d.Redis), OIDC: oidc, DevSignIn: cfg.DevSignIn,
			Secure: d.ServerTLS != nil || strings.HasPrefix(base, "https://"), BaseURL: base,
			SessionTTL: cfg.SessionTTL, CallTimeout: cfg.CallTimeout, Logger: d.Logger,
		})
		if err != nil {
			_ = lis.Close()
			closeConns()
			return service.Parts{}, err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
		if d.ServerTLS != nil {
			// Browsers present no client certificate: the client CAs
			// (mTLS) apply to the gRPC listener only.
			srv.TLSConfig = d.ServerTLS.Config(false, "h2", "http/1.1")
		}
		serve := func(ctx context.Context) error {
			errc := make(chan error, 1)
			go func() {
				if srv.TLSConfig != nil {
					errc <- srv.ServeTLS(lis, "", "")
					return
				}
				errc <- srv.Serve(lis)
			}()
			d.Logger.InfoContext(ctx, "console listening", "url", base, "oidc", cfg.OIDCIssuer != "", "dev_sign_in", cfg.DevSignIn)
			if cfg.Ready != nil {
				cfg.Ready(base)
			}
			select {
			case err := <-errc:
				return fmt.Errorf("console: %w", err)
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				_ = srv.Close()
			}
			return nil
		}
		return service.Parts{
			Register: func(*grpc.Server) {},
			Loops:    []func(context.Context) error{serve},
			Close: func() {
				_ = lis.Close()
				closeConns()
			},
		}, nil
	})
}

// Migrate creates the console's (empty) schema and returns (`console
// migrate`).
func Migrate(ctx context.Context, cfg Config) error {
	return service.Migrate(ctx, spec(), cfg.Common)
}
