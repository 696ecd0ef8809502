package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/revision/lease/executor"
)

// defaultExampleServer is the example MCP server's endpoint (`make run`
// starts it with -require-lease).
const defaultExampleServer = "http://127.0.0.1:7301/mcp"

// leaseCallCommand calls a tool on an MCP server with a lease and a fresh
// holder proof in `_meta`, as an executor holding the lease would be
// called.
func leaseCallCommand(e *env) *cobra.Command {
	var url, token, args, keyFile string
	return withFlags(&cobra.Command{
		Use: "call <tool-name>",
		Short: "call a tool on an MCP server (streamable HTTP) with a lease and a fresh holder proof in _meta; " +
			"a server using the executor kit runs it once",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<tool-name>"); err != nil {
				return err
			}
			priv, err := readHolderKey(keyFile)
			if err != nil {
				return err
			}
			var arguments map[string]any
			if err := json.Unmarshal([]byte(args), &arguments); err != nil {
				return fmt.Errorf("--args: not a JSON object: %w", err)
			}
			digest, err := argumentDigest(args)
			if err != nil {
				return fmt.Errorf("--args: %w", err)
			}
			id, audience, err := leaseIDAndAudience(token)
			if err != nil {
				return err
			}
			proof, err := lease.NewProof(priv, lease.Claims{ID: id, ArgumentDigest: digest, Audience: audience}, time.Now())
			if err != nil {
				return err
			}
			params := &mcp.CallToolParams{Name: a[0], Arguments: arguments}
			executor.Attach(params, token, proof)
			cctx, cancel := e.callCtx(ctx)
			defer cancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "toolcrib", Version: "1"}, nil).
				Connect(cctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
			if err != nil {
				return fmt.Errorf("connect to %s: %w", url, err)
			}
			defer cs.Close()
			res, err := cs.CallTool(cctx, params)
			if err != nil {
				return fmt.Errorf("tools/call: %w", err)
			}
			return printCallResult(e, res)
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&url, "url", defaultExampleServer, "the MCP server's endpoint")
		fs.StringVar(&token, "lease", "", "the lease token (required; from toolcrib lease issue)")
		fs.StringVar(&args, "args", "{}", "the call's arguments, JSON (the ones the lease was issued for)")
		fs.StringVar(&keyFile, "holder-key", filepath.Join(devDir, "holder-key.json"), "holder key file the proof is signed with")
	})
}

// printCallResult prints a tool result: the structured content (or the
// text) of a result, the failure of a refused one. A refused or failed call
// is an error (exit 1).
func printCallResult(e *env, res *mcp.CallToolResult) error {
	failure, _ := res.Meta[lease.MetaFailure].(string)
	if e.asJSON {
		if err := json.NewEncoder(e.stdout).Encode(res); err != nil {
			return err
		}
	} else {
		var text []string
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				text = append(text, t.Text)
			}
		}
		switch {
		case failure != "":
			w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "refused\t%s\n", failure)
			fmt.Fprintf(w, "detail\t%s\n", strings.Join(text, " "))
			if err := w.Flush(); err != nil {
				return err
			}
		case !res.IsError && res.StructuredContent != nil:
			b, err := json.MarshalIndent(res.StructuredContent, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, string(b))
		default:
			fmt.Fprintln(e.stdout, strings.Join(text, "\n"))
		}
	}
	switch {
	case failure != "":
		return fmt.Errorf("the server refused the lease: %s", failure)
	case res.IsError:
		return errors.New("the tool returned an error")
	}
	return nil
}

// leaseIDAndAudience reads the `jti` and `aud` of a lease token without
// verifying it: the proof names them, and the executor verifies the token.
func leaseIDAndAudience(token string) (string, string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", "", errors.New("--lease: not a compact JWS")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	var c struct {
		ID       string `json:"jti"`
		Audience string `json:"aud"`
	}
	if err != nil || json.Unmarshal(b, &c) != nil || c.ID == "" || c.Audience == "" {
		return "", "", errors.New("--lease: not a lease token (no jti or aud)")
	}
	return c.ID, c.Audience, nil
}
