// Command mcpstdio is a tiny MCP server on stdio for discovery's tests: it
// serves a static, paged catalog described by a JSON spec file (its only
// argument), optionally requiring a credential in its environment and
// recording the environment it was started with, and changing its catalog
// (with a list_changed) once a file appears.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpstdio:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) < 2 {
		return fmt.Errorf("usage: mcpstdio <spec.json> [args...]")
	}
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		return err
	}
	var spec discoverytest.StdioSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return err
	}
	if spec.EnvFile != "" {
		if err := os.WriteFile(spec.EnvFile, []byte(strings.Join(os.Environ(), "\n")), 0o600); err != nil {
			return err
		}
	}
	if spec.TokenEnv != "" && os.Getenv(spec.TokenEnv) != spec.Token {
		return fmt.Errorf("missing or wrong credential in %s", spec.TokenEnv)
	}
	cat := discoverytest.NewCatalog(spec.Revision, spec.PageSize, spec.Tools...)
	s := discoverytest.NewServer(cat, discoverytest.ServerOptions{Versions: spec.Versions})
	ss, err := s.MCP.Connect(context.Background(), s.Transport(&mcp.StdioTransport{}), nil)
	if err != nil {
		return err
	}
	if spec.ChangeFile != "" {
		go func() {
			for {
				if _, err := os.Stat(spec.ChangeFile); err == nil {
					cat.SetTools(spec.ChangedRevision, spec.ChangedTools...)
					s.Notify()
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return ss.Wait()
}
