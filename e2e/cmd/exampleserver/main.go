// Command exampleserver is a small MCP server opted into proven catalogs
// with the revision package: the server a newcomer registers with toolcrib
// and scans (docs/server-authors/revision-kit.md). The
// server itself is package github.com/toolcrib/toolcrib/e2e/inventory.
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
// With -require-lease, every `tools/call` runs only with a toolcrib
// execution lease and a fresh holder proof in its `_meta` (the executor kit,
// github.com/toolcrib/toolcrib/revision/lease/executor): signatures are
// checked offline against the lease service's GetSigningKeys, and Redeem at
// -lease-addr consumes the lease, so the same lease a second time is
// refused. Redeem is called with the token in -lease-token-file (read on
// every call; `toolcrib dev up` writes the dev service token there), over
// TLS trusting -lease-ca-file and presenting -lease-client-cert-file (the
// dev CA and client certificate `toolcrib dev up` and `toolcrib dev certs`
// make; the lease service requires a client certificate), or in plaintext
// with -lease-plaintext, or when the default CA file does not exist (a
// suite started with `toolcrib dev up --plaintext`).
//
// Usage:
//
//	exampleserver [-listen 127.0.0.1:7301] [-admin-listen 127.0.0.1:7302]
//	              [-stdio] [-stateful] [-page-size 2]
//	              [-require-lease] [-lease-addr 127.0.0.1:7104]
//	              [-lease-audience executor.inventory] [-server-id inventory]
//	              [-lease-token-file .toolcrib/dev/service-token]
//	              [-lease-ca-file .toolcrib/dev/ca.pem] [-lease-plaintext]
//	              [-lease-client-cert-file .toolcrib/dev/client.pem]
//	              [-lease-client-key-file .toolcrib/dev/client-key.pem]
//
// The cursor key comes from TOOLCRIB_EXAMPLE_CURSOR_KEY (16 bytes or more);
// without it a random key is made at start, so cursors die with the
// process, as they do with every revision change anyway.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolcrib/toolcrib/e2e/inventory"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/tlsconfig"
)

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
	var (
		cfg                                      inventory.Config
		requireLease, plaintext                  bool
		leaseAddr, audience, serverID, tokenFile string
		caFile, certFile, keyFile                string
	)
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:7301", "loopback address of the MCP endpoint (path /mcp)")
	fs.StringVar(&cfg.AdminListen, "admin-listen", "127.0.0.1:7302", "loopback address of the admin endpoint; empty for none")
	fs.BoolVar(&cfg.Stdio, "stdio", false, "serve MCP on stdin/stdout instead of HTTP")
	fs.BoolVar(&cfg.Stateful, "stateful", false, "use the stateful streamable HTTP handler (2025-11-25 and older only)")
	fs.IntVar(&cfg.PageSize, "page-size", 2, "tools per tools/list page")
	fs.BoolVar(&cfg.AskDock, "ask-dock", false, "inventory.lookup asks a client that declared elicitation which dock the stock is counted at (an upstream that asks back, for tests)")
	fs.BoolVar(&requireLease, "require-lease", false, "run tools/call only with a toolcrib execution lease and holder proof in _meta")
	fs.StringVar(&leaseAddr, "lease-addr", "127.0.0.1:7104", "lease service gRPC address (GetSigningKeys, Verify); with -require-lease")
	fs.StringVar(&audience, "lease-audience", "executor.inventory", "this executor's audience, as leases name it; with -require-lease")
	fs.StringVar(&serverID, "server-id", "inventory", "this server's id in toolcrib (tool ids are <server-id>.<tool name>); with -require-lease")
	fs.StringVar(&tokenFile, "lease-token-file", ".toolcrib/dev/service-token", "token file Verify is called with (read on every call); with -require-lease")
	fs.StringVar(&caFile, "lease-ca-file", devCAFile, "PEM CAs the lease service's certificate is verified against; plaintext when this default does not exist; with -require-lease")
	fs.StringVar(&certFile, "lease-client-cert-file", ".toolcrib/dev/client.pem", "PEM client certificate presented to the lease service (mTLS); with -require-lease")
	fs.StringVar(&keyFile, "lease-client-key-file", ".toolcrib/dev/client-key.pem", "PEM key of -lease-client-cert-file; with -require-lease")
	fs.BoolVar(&plaintext, "lease-plaintext", false, "call the lease service without TLS; with -require-lease")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.CursorKey = []byte(os.Getenv("TOOLCRIB_EXAMPLE_CURSOR_KEY"))
	if len(cfg.CursorKey) == 0 {
		cfg.CursorKey = []byte(rand.Text())
	}
	if requireLease {
		if leaseAddr == "" || audience == "" || serverID == "" || tokenFile == "" {
			return fmt.Errorf("-require-lease needs -lease-addr, -lease-audience, -server-id and -lease-token-file")
		}
		creds, err := leaseTransport(caFile, certFile, keyFile, plaintext, log)
		if err != nil {
			return fmt.Errorf("lease client: %w", err)
		}
		conn, err := grpc.NewClient(leaseAddr, grpc.WithTransportCredentials(creds),
			grpc.WithPerRPCCredentials(&principal.FileToken{Path: tokenFile}))
		if err != nil {
			return fmt.Errorf("lease client: %w", err)
		}
		defer conn.Close()
		cfg.Lease = inventory.LeaseOptions(conn, serverID, audience)
	}
	return inventory.Serve(ctx, cfg, log, nil)
}

// devCAFile is where `toolcrib dev up` writes its CA, relative to the
// directory it runs in.
const devCAFile = ".toolcrib/dev/ca.pem"

// leaseTransport is the lease client's transport: TLS with the CA and
// client certificate (re-read when they change), plaintext with
// -lease-plaintext or when the default CA file does not exist.
func leaseTransport(caFile, certFile, keyFile string, plaintext bool, log *slog.Logger) (credentials.TransportCredentials, error) {
	if plaintext {
		log.Warn("calling the lease service in plaintext (-lease-plaintext)")
		return insecure.NewCredentials(), nil
	}
	if _, err := os.Stat(caFile); err != nil && caFile == devCAFile {
		log.Warn("calling the lease service in plaintext: no " + devCAFile + " (start `toolcrib dev up` or `toolcrib dev certs` first, or pass -lease-ca-file)")
		return insecure.NewCredentials(), nil
	}
	c, err := tlsconfig.NewClient(tlsconfig.Options{CAFile: caFile, ClientCertFile: certFile, ClientKeyFile: keyFile}, log)
	if err != nil {
		return nil, err
	}
	return c.TransportCredentials(), nil
}
