// Command mcpfixture serves a toolcrib fixture script (package
// github.com/toolcrib/toolcrib/e2e/fixture) as an MCP server on stdio, the
// way a crawler launches a stdio server. It writes the fixture's mutation
// log as JSON lines, one flushed line per event, so the log survives the
// process being killed.
//
// Usage:
//
//	mcpfixture -script script.json -log log.jsonl [-admin 127.0.0.1:0 -admin-addr-file addr]
//
// With -admin it also serves the fixture's admin API (see
// fixture.Server.AdminHandler) on that loopback address and writes the
// address it bound to -admin-addr-file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolcrib/toolcrib/e2e/fixture"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpfixture:", err)
		os.Exit(1)
	}
}

func run() error {
	scriptPath := flag.String("script", "", "fixture script (JSON); required")
	logPath := flag.String("log", "", "mutation log to write (JSON lines); empty for none")
	admin := flag.String("admin", "", "loopback address for the admin API; empty for none")
	adminAddrFile := flag.String("admin-addr-file", "", "file to write the admin API's bound address to")
	flag.Parse()
	if *scriptPath == "" {
		return errors.New("-script is required")
	}
	script, err := fixture.ReadScript(*scriptPath)
	if err != nil {
		return err
	}
	opts := &fixture.Options{}
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.LogSink = f
	}
	s, err := fixture.New(script, opts)
	if err != nil {
		return err
	}
	defer s.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *admin != "" {
		host, _, err := net.SplitHostPort(*admin)
		if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			return fmt.Errorf("-admin %q is not a loopback address", *admin)
		}
		ln, err := net.Listen("tcp", *admin)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: s.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		if *adminAddrFile != "" {
			if err := os.WriteFile(*adminAddrFile, []byte(ln.Addr().String()), 0o600); err != nil {
				return err
			}
		}
	}
	err = s.RunStdio(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if serr := s.Log().SinkErr(); serr != nil {
		return fmt.Errorf("writing the log: %w", serr)
	}
	return err
}
