package inventory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"

	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	"github.com/toolcrib/toolcrib/revision"
	"github.com/toolcrib/toolcrib/revision/lease/executor"
	"github.com/toolcrib/toolcrib/services/lease/leaseclient"
)

// Config configures [Serve].
type Config struct {
	// Listen is the MCP endpoint's loopback address (HTTP mode; path /mcp).
	Listen string
	// AdminListen is the admin endpoint's loopback address; empty for none.
	AdminListen string
	// Stdio serves MCP on stdin/stdout instead of HTTP.
	Stdio bool
	// Stateful uses the stateful streamable HTTP handler (2025-11-25 and
	// older only).
	Stateful bool
	// PageSize is the number of tools per `tools/list` page.
	PageSize int
	// CursorKey signs the revision-bound cursors (16 bytes or more).
	CursorKey []byte
	// AskDock makes inventory.lookup ask its client, when the client
	// declared elicitation, which dock the stock is counted at, and answer
	// it in a second text content ("dock: …"); the tool's descriptor is
	// the same.
	AskDock bool
	// Lease, when set, makes every `tools/call` need a toolcrib execution
	// lease and holder proof in `_meta` (the executor kit,
	// [executor.Require]); nil serves calls without one.
	Lease *executor.Options
}

// Serve runs the server until ctx ends. ready, if set, gets the MCP and
// admin URLs once both listen (the MCP URL is empty with Stdio).
func Serve(ctx context.Context, cfg Config, log *slog.Logger, ready func(mcpURL, adminURL string)) error {
	server := mcp.NewServer(&mcp.Implementation{Name: "toolcrib-exampleserver", Version: "1.0.0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		// The SDK logs every stateless request's session at info.
		Logger: slog.New(warnOnly{log.Handler()}),
	})
	catalog, err := revision.New(server, revision.Options{Key: cfg.CursorKey, PageSize: cfg.PageSize})
	if err != nil {
		return err
	}
	if cfg.Lease != nil {
		if err := executor.Require(server, *cfg.Lease); err != nil {
			return err
		}
		log.Info("tools/call needs a lease", "server_id", cfg.Lease.ServerID, "audience", cfg.Lease.Audience)
	}
	inv := newInventory(catalog)
	inv.askDock = cfg.AskDock
	inv.addTools()
	log.Info("catalog ready", "revision", catalog.Revision())

	var adminURL string
	if cfg.AdminListen != "" {
		ln, err := listenLoopback(cfg.AdminListen)
		if err != nil {
			return fmt.Errorf("admin endpoint: %w", err)
		}
		srv := &http.Server{Handler: inv.adminHandler(log), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer shutdown(srv)
		adminURL = "http://" + ln.Addr().String() + "/admin"
		log.Info("admin endpoint listening", "url", adminURL)
	}

	if cfg.Stdio {
		if ready != nil {
			ready("", adminURL)
		}
		err := server.Run(ctx, &mcp.StdioTransport{})
		if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}

	ln, err := listenLoopback(cfg.Listen)
	if err != nil {
		return fmt.Errorf("MCP endpoint: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: !cfg.Stateful}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer shutdown(srv)
	mcpURL := "http://" + ln.Addr().String() + "/mcp"
	log.Info("MCP endpoint listening", "url", mcpURL, "stateless", !cfg.Stateful, "page_size", cfg.PageSize)
	if ready != nil {
		ready(mcpURL, adminURL)
	}
	<-ctx.Done()
	return nil
}

func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%q is not a loopback address", addr)
	}
	return net.Listen("tcp", addr)
}

func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
}

// warnOnly passes on warnings and errors only.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnOnly) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnOnly{h.Handler.WithAttrs(attrs)}
}

func (h warnOnly) WithGroup(name string) slog.Handler { return warnOnly{h.Handler.WithGroup(name)} }

// LeaseOptions are the executor kit's options for a lease service on conn
// (whose calls carry this executor's credential): keys from GetSigningKeys,
// cached and refetched once for a newly rotated key, and Redeem (with the
// executor's service identity) for single use, revocation, freeze and
// freshness. Tool ids are `<serverID>.<tool name>`.
func LeaseOptions(conn grpc.ClientConnInterface, serverID, audience string) *executor.Options {
	lc := leaseclient.New(leasev1.NewLeaseServiceClient(conn), 0)
	return &executor.Options{ServerID: serverID, Audience: audience, Keys: lc.Keys, RefreshKeys: lc.Refresh, Redeemer: lc}
}
