// Command exampleserver is a small MCP server opted into proven catalogs
// with the revision package: the server a newcomer registers with toolcrib
// and scans (README, "Opting an MCP server into proven catalogs").
//
// It serves four inventory and shipment tools over streamable HTTP (or
// stdio with -stdio), two per `tools/list` page so pagination shows, with
// `_meta["dev.toolcrib/catalog-revision"]` on every page. A loopback admin
// endpoint changes a tool's description at runtime, which moves the
// revision and sends `notifications/tools/list_changed`:
//
//	curl -X PUT --data 'Reserve stock and repair counts.' \
//	  http://127.0.0.1:7302/admin/tools/inventory.reserve/description
//
// Usage:
//
//	exampleserver [-listen 127.0.0.1:7301] [-admin-listen 127.0.0.1:7302]
//	              [-stdio] [-stateful] [-page-size 2]
//
// The cursor key comes from TOOLCRIB_EXAMPLE_CURSOR_KEY (16 bytes or more);
// without it a random key is made at start, so cursors die with the
// process, as they do with every revision change anyway.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/revision"
)

type config struct {
	listen      string // MCP endpoint address (HTTP mode)
	adminListen string // admin endpoint address; empty for none
	stdio       bool
	stateful    bool
	pageSize    int
	cursorKey   []byte
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, os.Args[1:], log); err != nil {
		log.Error("exampleserver", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("exampleserver", flag.ContinueOnError)
	var cfg config
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:7301", "loopback address of the MCP endpoint (path /mcp)")
	fs.StringVar(&cfg.adminListen, "admin-listen", "127.0.0.1:7302", "loopback address of the admin endpoint; empty for none")
	fs.BoolVar(&cfg.stdio, "stdio", false, "serve MCP on stdin/stdout instead of HTTP")
	fs.BoolVar(&cfg.stateful, "stateful", false, "use the stateful streamable HTTP handler (2025-11-25 and older only)")
	fs.IntVar(&cfg.pageSize, "page-size", 2, "tools per tools/list page")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.cursorKey = []byte(os.Getenv("TOOLCRIB_EXAMPLE_CURSOR_KEY"))
	if len(cfg.cursorKey) == 0 {
		cfg.cursorKey = []byte(rand.Text())
	}
	return serve(ctx, cfg, log, nil)
}

// serve runs the server until ctx ends. ready, if set, gets the MCP and
// admin URLs once both listen.
func serve(ctx context.Context, cfg config, log *slog.Logger, ready func(mcpURL, adminURL string)) error {
	server := mcp.NewServer(&mcp.Implementation{Name: "toolcrib-exampleserver", Version: "1.0.0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		// The SDK logs every stateless request's session at info.
		Logger: slog.New(warnOnly{log.Handler()}),
	})
	catalog, err := revision.New(server, revision.Options{Key: cfg.cursorKey, PageSize: cfg.pageSize})
	if err != nil {
		return err
	}
	inv := newInventory(catalog)
	inv.addTools()
	log.Info("catalog ready", "revision", catalog.Revision())

	var adminURL string
	if cfg.adminListen != "" {
		ln, err := listenLoopback(cfg.adminListen)
		if err != nil {
			return fmt.Errorf("admin endpoint: %w", err)
		}
		srv := &http.Server{Handler: inv.adminHandler(log), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer shutdown(srv)
		adminURL = "http://" + ln.Addr().String() + "/admin"
		log.Info("admin endpoint listening", "url", adminURL)
	}

	if cfg.stdio {
		if ready != nil {
			ready("", adminURL)
		}
		err := server.Run(ctx, &mcp.StdioTransport{})
		if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}

	ln, err := listenLoopback(cfg.listen)
	if err != nil {
		return fmt.Errorf("MCP endpoint: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: !cfg.stateful}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer shutdown(srv)
	mcpURL := "http://" + ln.Addr().String() + "/mcp"
	log.Info("MCP endpoint listening", "url", mcpURL, "stateless", !cfg.stateful, "page_size", cfg.pageSize)
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
