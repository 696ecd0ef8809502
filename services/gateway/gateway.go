package gateway

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/service"
	"github.com/toolcrib/toolcrib/platform/tlsconfig"
	"github.com/toolcrib/toolcrib/revision"
	"github.com/toolcrib/toolcrib/services/gateway/internal/artifact"
	"github.com/toolcrib/toolcrib/services/gateway/internal/bearer"
	"github.com/toolcrib/toolcrib/services/gateway/internal/directory"
	"github.com/toolcrib/toolcrib/services/gateway/internal/mcpapi"
	"github.com/toolcrib/toolcrib/services/gateway/internal/metrics"
	"github.com/toolcrib/toolcrib/services/gateway/internal/sessionpool"
	"github.com/toolcrib/toolcrib/services/gateway/migrations"
)

// Schema is the gateway's Postgres schema (artifacts).
const Schema = "gateway"

// Migrations are the gateway's migration sets.
func Migrations() []postgres.Set { return []postgres.Set{migrations.Set()} }

// HealthName is the name the gateway's gRPC health status is also
// reported under (the gateway has no gRPC API of its own).
const HealthName = "toolcrib.gateway.v1.Gateway"

func spec() service.Spec {
	return service.Spec{Name: "gateway", Schema: Schema, Migrations: Migrations(), UsesRedis: true, HealthNames: []string{HealthName}}
}

// RunIDHeader is the HTTP header naming the agent run of a request: the
// run's visible set and decisions (a server in CANARY admits only runs in
// its share; admission binds the run's generation). See
// [mcpapi.RunIDHeader].
const RunIDHeader = mcpapi.RunIDHeader

// Run serves the gateway until ctx ends (nil after a clean stop): the MCP
// endpoint and its OAuth metadata on MCPListen, the visible-set watch, the
// artifact retention sweep, and gRPC health and metrics as every service.
func Run(ctx context.Context, cfg Config) error {
	return service.Run(ctx, spec(), cfg.Common, func(ctx context.Context, d *service.Deps) (service.Parts, error) {
		key, err := cursorKey(cfg.CursorKeyFile)
		if err != nil {
			return service.Parts{}, err
		}
		codec, err := revision.NewCursorCodec(key)
		if err != nil {
			return service.Parts{}, err
		}
		_, holder, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return service.Parts{}, err
		}
		secrets, err := cfg.Secrets.Policy()
		if err != nil {
			return service.Parts{}, err
		}
		egressPolicy, err := cfg.Egress.Policy()
		if err != nil {
			return service.Parts{}, err
		}
		var conns []*grpc.ClientConn
		closeConns := func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}
		dial := func(addr string, service bool) (*grpc.ClientConn, error) {
			opts := []grpc.DialOption{grpc.WithTransportCredentials(d.Transport)}
			if service {
				opts = d.ServiceDialOptions()
			} else {
				opts = append(opts, cfg.ClientOptions...)
			}
			c, err := grpc.NewClient(addr, opts...)
			if err == nil {
				conns = append(conns, c)
			}
			return c, err
		}
		aconn, err1 := dial(cfg.AdmissionAddr, false)
		lconn, err2 := dial(cfg.LeaseAddr, false)
		rconn, err3 := dial(cfg.RegistryAddr, true)
		dconn, err4 := dial(cfg.DiscoveryAddr, true)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			closeConns()
			return service.Parts{}, fmt.Errorf("clients: %w", err)
		}
		lis, err := net.Listen("tcp", cfg.MCPListen)
		if err != nil {
			closeConns()
			return service.Parts{}, fmt.Errorf("listen %s: %w", cfg.MCPListen, err)
		}
		peerURL := cfg.PeerURL
		if peerURL == "" {
			scheme := "http://"
			if d.ServerTLS != nil {
				scheme = "https://"
			}
			peerURL = scheme + lis.Addr().String() + MCPPath
		}
		var gw *mcpapi.Gateway
		pool := sessionpool.New(egressPolicy, d.Logger, func(ctx context.Context, p *mcp.ProgressNotificationParams) { gw.RelayProgress(ctx, p) })
		pool.CredentialEnv = cfg.StdioCredentialEnv
		// An answer up to the artifact limit arrives whole; a larger one is
		// refused before it is all in memory (unbounded before).
		pool.MaxMessageBytes = sessionpool.MessageBytesFor(cfg.MaxArtifactBytes)
		m := metrics.New(d.Metrics)
		var confirmer credentials.PerRPCCredentials
		if cfg.ConfirmerTokenFile != "" {
			confirmer = &principal.ConfirmerFileToken{FileToken: principal.FileToken{Path: cfg.ConfirmerTokenFile}}
		}
		gw = mcpapi.New(mcpapi.Options{
			Admission: admissionv1.NewAdmissionServiceClient(aconn),
			Lease:     leasev1.NewLeaseServiceClient(lconn),
			Directory: directory.New(registryv1.NewRegistryServiceClient(rconn), discoveryv1.NewDiscoveryServiceClient(dconn), secrets, nil),
			Upstream:  pool, Artifacts: artifact.New(d.Pool), Redis: d.Redis, Cursors: codec, Holder: holder,
			PageSize: cfg.PageSize, ListTTL: cfg.ListTTL, WatchInterval: cfg.WatchInterval, IdleTimeout: cfg.IdleTimeout, MaxSessionsPerPrincipal: cfg.MaxSessionsPerPrincipal,
			LeaseAudiencePrefix: cfg.LeaseAudiencePrefix, DefaultDeadline: cfg.DefaultDeadline, ConfirmTTL: cfg.ConfirmTTL,
			ResultBudget: cfg.ResultBudget, PreviewBytes: cfg.PreviewBytes, MaxArtifactBytes: cfg.MaxArtifactBytes,
			Retention: cfg.ArtifactRetention, ArtifactQuota: artifact.Quota{Bytes: int64(cfg.ArtifactQuotaBytes), Count: int64(cfg.ArtifactQuotaCount)},
			FindTools: cfg.FindTools, SamplingMaxTokens: int64(cfg.SamplingMaxTokens), Metrics: m, Logger: d.Logger, Confirmer: confirmer,
			PeerURL: peerURL, PeerTransport: peerTransport(d.ClientTLS),
		})
		endpoint := cfg.mcpURL(lis.Addr().String())
		metadataURL := strings.TrimSuffix(endpoint, MCPPath) + MetadataPath
		origins, err := cfg.Origins()
		if err != nil {
			_ = lis.Close()
			closeConns()
			return service.Parts{}, fmt.Errorf("--allowed-origins: %w", err)
		}
		mux := http.NewServeMux()
		// A browser page of an origin not allowed is refused before its
		// token is looked at (DNS rebinding, cross-site requests).
		var mcpHandler http.Handler = mcpapi.CheckOrigin(origins, bearer.Require(d.Verifier, metadataURL, gw.Handler()))
		if cfg.WrapMCP != nil {
			mcpHandler = cfg.WrapMCP(mcpHandler)
		}
		mux.Handle(MCPPath, mcpHandler)
		// The issuers the verifier trusts are the authorization servers a
		// client may get a token from (RFC 9728 §2).
		md := bearer.Metadata(endpoint, append([]string{cfg.AuthorizationServer}, d.Verifier.Issuers()...)...)
		mux.Handle(MetadataPath, md)
		mux.Handle(MetadataPath+MCPPath, md) // RFC 9728 §3.1: the path-suffixed form
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		if d.ServerTLS != nil {
			// MCP clients authenticate with bearer tokens; the client CAs
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
			d.Logger.InfoContext(ctx, "MCP endpoint listening", "url", endpoint, "metadata", metadataURL)
			if cfg.Ready != nil {
				cfg.Ready(endpoint)
			}
			select {
			case err := <-errc:
				return fmt.Errorf("mcp endpoint: %w", err)
			case <-ctx.Done():
			}
			gw.Drain()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				_ = srv.Close()
			}
			return nil
		}
		sweepEvery := min(cfg.ArtifactRetention/10, time.Minute)
		return service.Parts{
			Register: func(*grpc.Server) {},
			Loops: []func(context.Context) error{
				serve, gw.Run, gw.Advertise,
				func(ctx context.Context) error { return gw.SweepArtifacts(ctx, sweepEvery) },
			},
			Close: func() {
				_ = lis.Close()
				pool.Close()
				closeConns()
			},
		}, nil
	})
}

// cursorKey reads the cursor key file, creating it with a random key
// (mode 0600) when absent.
func cursorKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if k := []byte(strings.TrimSpace(string(b))); len(k) >= revision.MinKeyLength {
			return k, nil
		}
		return nil, fmt.Errorf("--cursor-key-file %s: the key must have at least %d bytes", path, revision.MinKeyLength)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("--cursor-key-file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("--cursor-key-file: %w", err)
	}
	k := []byte(rand.Text() + rand.Text())
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return cursorKey(path) // another replica made it first
	}
	if err != nil {
		return nil, fmt.Errorf("--cursor-key-file: %w", err)
	}
	if _, err := f.Write(k); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cursor-key-file: %w", err)
	}
	return k, f.Close()
}

// Migrate runs the gateway's migrations and returns (`gateway migrate`).
func Migrate(ctx context.Context, cfg Config) error {
	return service.Migrate(ctx, spec(), cfg.Common)
}

// peerTransport carries requests forwarded to the replica holding a
// session: with client TLS configured it verifies the peer against
// --tls-ca-file (a private CA, as the other toolcrib services are) and
// presents the client pair; never through an ambient HTTP proxy (forwarded
// requests carry the client's bearer token). nil without client TLS: the
// gateway's default (system roots).
func peerTransport(c *tlsconfig.Client) http.RoundTripper {
	if c == nil {
		return nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialTLSContext = c.DialTLSContext
	return tr
}
