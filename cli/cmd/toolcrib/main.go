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
// for one command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
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
	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// command is one `toolcrib <name>` command.
type command struct {
	// name is one or more words, e.g. `server register`.
	name string
	// args describes the positional arguments, e.g. `<server-id>`.
	args string
	// summary is one line for `toolcrib help`.
	summary string
	// flags registers the command's flags; may be nil.
	flags func(fs *flag.FlagSet)
	// run does the work with the parsed flags' positional arguments.
	run func(ctx context.Context, e *env, args []string) error
}

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

func commands() []command {
	var all []command
	all = append(all, devCommands()...)
	all = append(all, registryCommands()...)
	all = append(all, discoveryCommands()...)
	all = append(all, admissionCommands()...)
	all = append(all, leaseCommands()...)
	all = append(all, guardCommands()...)
	all = append(all, healthCommand())
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	return all
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "toolcrib:", describe(err))
	}
	os.Exit(exitCode(err))
}

// exitCode is the process's exit status after run returned err: 0 on
// success (asking for help is a success), 1 otherwise (a missing command
// too: its usage was printed instead of doing anything).
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// Everything printed passes the terminal writer: no raw control
	// character from server data reaches the operator's terminal.
	e := &env{stdout: newTerminalWriter(stdout), stderr: newTerminalWriter(stderr), conns: map[string]*grpc.ClientConn{}}
	defer func() {
		for _, c := range e.conns {
			c.Close()
		}
	}()
	gs := config.NewSet("toolcrib", nil)
	gs.String(&e.registryAddr, "registry", "TOOLCRIB_REGISTRY_ADDR", "127.0.0.1:7101", "registry gRPC address")
	gs.String(&e.discoveryAddr, "discovery", "TOOLCRIB_DISCOVERY_ADDR", "127.0.0.1:7102", "discovery gRPC address")
	gs.String(&e.admissionAddr, "admission", "TOOLCRIB_ADMISSION_ADDR", "127.0.0.1:7103", "admission gRPC address")
	gs.String(&e.leaseAddr, "lease", "TOOLCRIB_LEASE_ADDR", "127.0.0.1:7104", "lease gRPC address")
	gs.String(&e.token, "token", "TOOLCRIB_TOKEN", "", "bearer token to present")
	gs.String(&e.tokenFile, "token-file", "TOOLCRIB_TOKEN_FILE", devAdminTokenFile,
		"file with the bearer token, used when --token is empty; the default is looked for in this directory and every parent")
	gs.Bool(&e.asJSON, "json", "TOOLCRIB_JSON", false, "print results as JSON")
	gs.Duration(&e.timeout, "timeout", "TOOLCRIB_TIMEOUT", 30*time.Second, "deadline of each call (not of streams)")
	registerTLSFlags(gs, &e.tls)
	fs := gs.FlagSet()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// `toolcrib -h` / `--help`: asked for, so on stdout and a success.
			fmt.Fprint(stdout, globalUsage(gs))
			return nil
		}
		fmt.Fprint(stderr, globalUsage(gs))
		return err
	}
	if err := e.tls.resolve(); err != nil {
		return err
	}
	lookedUpward := e.tokenFile == devAdminTokenFile
	if lookedUpward {
		e.tokenFile = findUpward(devAdminTokenFile)
	}
	rest := fs.Args()
	if len(rest) == 0 || rest[0] == "help" || rest[0] == "-h" || rest[0] == "--help" {
		if len(rest) > 1 {
			if c, _ := find(rest[1:]); c != nil {
				fmt.Fprint(stdout, commandUsage(c))
				return nil
			}
		}
		fmt.Fprint(stdout, globalUsage(gs))
		if len(rest) == 0 {
			return flag.ErrHelp
		}
		return nil
	}
	c, cargs := find(rest)
	if c == nil {
		fmt.Fprint(stderr, globalUsage(gs))
		return fmt.Errorf("unknown command %q", strings.Join(rest, " "))
	}
	cfs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	cfs.SetOutput(io.Discard)
	if c.flags != nil {
		c.flags(cfs)
	}
	positional, err := parseInterspersed(cfs, cargs)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, commandUsage(c))
			return nil
		}
		fmt.Fprint(stderr, commandUsage(c))
		return err
	}
	err = c.run(ctx, e, positional)
	if hint := e.tls.tlsMismatchHint(err); hint != "" {
		err = status.Error(codes.Unavailable, status.Convert(err).Message()+"\n  "+hint)
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unauthenticated && e.token == "" {
		if _, statErr := os.Stat(e.tokenFile); statErr != nil {
			// A new status with the hint, not a wrapped one: the code is
			// printed once.
			where := ""
			if lookedUpward {
				where = " here or in any parent directory"
			}
			err = status.Error(codes.Unauthenticated, fmt.Sprintf("%s\n  no token was sent: %s does not exist%s; start the suite with `make run`, "+
				"which writes it, or pass --token (TOOLCRIB_TOKEN)", st.Message(), e.tokenFile, where))
		}
	}
	return err
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

// parseInterspersed parses a command's flags wherever they stand among its
// arguments (`tool show X --no-history` as `tool show --no-history X`); after
// `--` everything is an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
}

// find returns the command whose name is the longest prefix of words.
func find(words []string) (*command, []string) {
	var best *command
	n := 0
	for _, c := range commands() {
		parts := strings.Fields(c.name)
		if len(parts) <= len(words) && len(parts) > n && strings.Join(words[:len(parts)], " ") == c.name {
			c := c
			best, n = &c, len(parts)
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, words[n:]
}

func globalUsage(gs *config.Set) string {
	var b strings.Builder
	b.WriteString("toolcrib: operate the toolcrib control plane for MCP tools.\n\nUsage: toolcrib [global flags] <command> [flags] [arguments]\n\nCommands:\n")
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %s %s\t%s\n", c.name, c.args, c.summary)
	}
	w.Flush()
	b.WriteString("\nGlobal flags:\n")
	b.WriteString(gs.Usage())
	b.WriteString("\nRun `toolcrib help <command>` for a command's flags.\n")
	return b.String()
}

func commandUsage(c *command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: toolcrib %s [flags] %s\n\n%s\n", c.name, c.args, c.summary)
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	if c.flags != nil {
		c.flags(fs)
	}
	has := false
	fs.VisitAll(func(*flag.Flag) { has = true })
	if has {
		b.WriteString("\nFlags:\n")
		fs.SetOutput(&b)
		fs.PrintDefaults()
	}
	return b.String()
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
