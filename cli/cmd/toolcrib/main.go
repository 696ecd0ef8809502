// Command toolcrib is the command-line tool for operating toolcrib: it
// registers MCP servers, publishes and reviews tool contracts, grants and
// revokes scopes, triggers scans and inspects generations, and runs the
// whole suite locally (`toolcrib dev up`).
//
// Usage:
//
//	toolcrib [global flags] <command> [flags] [arguments]
//
// Run `toolcrib help` for the list of commands and `toolcrib help <command>`
// (or `toolcrib <command> --help`) for one command's flags. The commands are
// built on github.com/spf13/cobra, one file per command group (root.go
// assembles the tree); docs/cli/ is their generated reference.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// env is what every command gets: global settings, output and clients.
type env struct {
	registryAddr  string
	discoveryAddr string
	admissionAddr string
	leaseAddr     string
	token         string
	tokenFile     string
	asJSON        bool
	timeout       time.Duration
	tls           clientTLS
	stdout        io.Writer
	stderr        io.Writer
	conns         map[string]*grpc.ClientConn
	// lookedUpward is set when the default token file was looked for in
	// the working directory and its parents.
	lookedUpward bool
	// lookup reads the environment (TOOLCRIB_* defaults of command flags).
	lookup func(string) (string, bool)
}

// stoppedByCaller reports whether a watch stream failed only because the
// caller's context ended: cancelled, or past its deadline. The server may
// act on the deadline (sent as grpc-timeout) a moment before the client's
// own timer fires, so DeadlineExceeded counts whenever ctx has a deadline.
func stoppedByCaller(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	_, hasDeadline := ctx.Deadline()
	return hasDeadline && status.Code(err) == codes.DeadlineExceeded
}

// dial returns a client connection to addr carrying the bearer token.
func (e *env) dial(addr string) (*grpc.ClientConn, error) {
	if c, ok := e.conns[addr]; ok {
		return c, nil
	}
	creds, err := e.tls.transport()
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	switch {
	case e.token != "":
		opts = append(opts, grpc.WithPerRPCCredentials(principal.BearerToken(e.token)))
	case e.tokenFile != "":
		if _, err := os.Stat(e.tokenFile); err == nil {
			opts = append(opts, grpc.WithPerRPCCredentials(&principal.FileToken{Path: e.tokenFile}))
		}
	}
	c, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	e.conns[addr] = c
	return c, nil
}

// printJSON writes m as indented protojson.
func (e *env) printJSON(m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: false}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, string(b))
	return err
}

// output prints m as JSON with --json, else calls text with a tab writer.
func (e *env) output(m proto.Message, text func(w *tabwriter.Writer)) error {
	if e.asJSON {
		return e.printJSON(m)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	text(w)
	return w.Flush()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, errUsagePrinted) {
		fmt.Fprintln(os.Stderr, "toolcrib:", describe(err))
	}
	os.Exit(exitCode(err))
}

// exitCode is the process's exit status after run returned err: 0 on
// success (asking for help is a success), 1 otherwise (a missing command
// too: its usage was printed instead of doing anything). [exitCodesHelp]
// documents it.
func exitCode(err error) int {
	if err != nil {
		return 1
	}
	return 0
}

// describe turns a gRPC error into a readable line, with field violations.
func describe(err error) string {
	st := apierror.ToStatus(err)
	if _, isStatus := status.FromError(err); !isStatus {
		return err.Error()
	}
	msg := fmt.Sprintf("%s: %s", st.Code(), st.Message())
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				msg += fmt.Sprintf("\n  %s: %s", v.GetField(), v.GetDescription())
			}
		}
	}
	return msg
}

// devAdminTokenFile is where `toolcrib dev up` writes the admin token,
// relative to the directory it runs in (the repository root for `make run`).
const devAdminTokenFile = ".toolcrib/dev/admin-token"

// findUpward returns the first of rel under the working directory and
// each of its parents that exists; rel itself when none does (so messages
// name the path the CLI looked for).
func findUpward(rel string) string {
	dir, err := os.Getwd()
	if err != nil {
		return rel
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return rel
		}
		dir = parent
	}
}

// callCtx returns a context with the per-call deadline.
func (e *env) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.timeout)
}

// needArgs checks the number of positional arguments.
func needArgs(args []string, n int, what string) error {
	if len(args) != n {
		return fmt.Errorf("expected %s, got %d argument(s)", what, len(args))
	}
	return nil
}
