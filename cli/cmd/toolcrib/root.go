package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/platform/config"
)

// exitCodesHelp documents the exit status (see [exitCode]); it ends the
// root command's help and the generated reference.
const exitCodesHelp = `Exit status:

- 0: success, and asking for help (--help, -h, help <command>).
- 1: anything else: a usage error (no or an unknown command, an unknown flag,
  wrong arguments; the usage is printed on stderr), a failed call (its gRPC
  code and message are printed, e.g. "PermissionDenied: ..."), or a command's
  own negative answer: discovery scan --wait whose scan did not activate a
  catalog, lease verify or lease call refused, health with a service not
  SERVING, apply with an invalid registry file. A decision is not an error:
  check prints DENY with exit 0.`

// errUsagePrinted is returned when the usage was printed instead of running
// anything (no command): exit 1, nothing more to print.
var errUsagePrinted = errors.New("toolcrib: no command")

// newRoot builds the command tree. Global flags are persistent flags of the
// root, backed by TOOLCRIB_* environment variables read through lookup (nil:
// the process environment); the returned error lists malformed ones.
func newRoot(e *env, lookup func(string) (string, bool)) (*cobra.Command, error) {
	root := &cobra.Command{
		Use:   "toolcrib [global flags] <command> [flags] [arguments]",
		Short: "operate the toolcrib control plane for MCP tools",
		Long: "toolcrib: operate the toolcrib control plane for MCP tools: register MCP servers, publish and review\n" +
			"tool contracts, grant scopes, trigger scans, check calls, issue leases and run the suite locally.\n\n" + exitCodesHelp,
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
		Args:              cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			cmd.Usage()
			return errUsagePrinted
		},
	}
	root.SetUsageTemplate(usageTemplate)
	root.SetHelpTemplate(`{{if not .HasParent}}{{.Long}}

{{end}}{{.UsageString}}`)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprint(c.ErrOrStderr(), c.UsageString())
		return err
	})
	gs := config.NewSet("toolcrib", lookup)
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
	root.PersistentFlags().AddGoFlagSet(gs.FlagSet())
	if lookup == nil {
		lookup = os.LookupEnv
	}
	e.lookup = lookup

	root.AddCommand(serverGroup(e), tenantGroup(e), audienceGroup(e), grantScopesCommand(e), revokeScopesCommand(e),
		policyGroup(e), toolGroup(e), contractGroup(e), discoveryGroup(e), rolloutGroup(e),
		checkCommand(e), visibleCommand(e), leaseGroup(e), watchCommand(e), healthCommand(e),
		applyCommand(e), diffCommand(e), exportCommand(e), devGroup(e), genDocsCommand())
	return root, gs.Parse(nil)
}

// group is a command that only holds subcommands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			cmd.Usage()
			return fmt.Errorf("%s: name a subcommand", cmd.CommandPath())
		}}
	g.AddCommand(subs...)
	return g
}

// withFlags registers a command's flags and returns it.
func withFlags(c *cobra.Command, flags func(fs *pflag.FlagSet)) *cobra.Command {
	flags(c.Flags())
	return c
}

// usageTemplate is cobra's, with the usage line first as `Usage: …` and
// the flags printed with their defaults.
const usageTemplate = `Usage: {{.UseLine}}{{if and .HasParent .HasAvailableSubCommands}}
       {{.CommandPath}} <command> [flags] [arguments]{{end}}
{{if not .HasParent}}{{else}}
{{.Short}}
{{end}}{{if .HasAvailableSubCommands}}
Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}
{{end}}{{if .HasAvailableLocalFlags}}
Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}
{{end}}{{if .HasAvailableInheritedFlags}}
Global flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}
{{end}}{{if .HasAvailableSubCommands}}
Run '{{.CommandPath}} <command> --help' for a command's flags.
{{end}}`

// run runs the CLI with args, as main does with the process's.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// Everything printed passes the terminal writer: no raw control
	// character from server data reaches the operator's terminal.
	e := &env{stdout: newTerminalWriter(stdout), stderr: newTerminalWriter(stderr), conns: map[string]*grpc.ClientConn{}}
	defer func() {
		for _, c := range e.conns {
			c.Close()
		}
	}()
	root, envErr := newRoot(e, nil)
	if envErr != nil {
		return envErr
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	rest, err := takeGlobalFlags(root, singleDashLongFlags(root, args))
	if err != nil {
		fmt.Fprint(e.stderr, root.UsageString())
		return err
	}
	root.SetArgs(rest)
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if e.tokenFile == devAdminTokenFile {
			e.lookedUpward, e.tokenFile = true, findUpward(devAdminTokenFile)
		}
		return e.tls.resolve()
	}
	err = root.ExecuteContext(ctx)
	if hint := e.tls.tlsMismatchHint(err); hint != "" {
		err = status.Error(codes.Unavailable, status.Convert(err).Message()+"\n  "+hint)
	}
	if err != nil && strings.HasPrefix(err.Error(), "unknown command ") {
		// The usage of the deepest command named, e.g. `discovery`'s for
		// `toolcrib discovery nope`.
		c, _, findErr := root.Find(args)
		if findErr != nil || c == nil {
			c = root
		}
		fmt.Fprint(e.stderr, c.UsageString())
	}
	return tokenHint(e, err)
}

// tokenHint adds, to an UNAUTHENTICATED answer to a call that sent no
// token, where the CLI looked for one.
func tokenHint(e *env, err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unauthenticated || e.token != "" {
		return err
	}
	if _, statErr := os.Stat(e.tokenFile); statErr == nil {
		return err
	}
	// A new status with the hint, not a wrapped one: the code is printed
	// once.
	where := ""
	if e.lookedUpward {
		where = " here or in any parent directory"
	}
	return status.Error(codes.Unauthenticated, fmt.Sprintf("%s\n  no token was sent: %s does not exist%s; start the suite with `make run`, "+
		"which writes it, or pass --token (TOOLCRIB_TOKEN)", st.Message(), e.tokenFile, where))
}

// takeGlobalFlags sets the global flags written before the command's name
// and returns the other arguments. Those are the global ones even where
// the command has a flag of the same name: `toolcrib --lease ADDR lease
// verify --lease TOKEN` reads the lease service at ADDR and verifies TOKEN.
// Anything else before the name (--help, an unknown flag) is left to cobra.
func takeGlobalFlags(root *cobra.Command, args []string) ([]string, error) {
	global := root.PersistentFlags()
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "--") {
			return append(rest, args[i:]...), nil
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		f := global.Lookup(name)
		if f == nil {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if f.NoOptDefVal != "" {
				value = f.NoOptDefVal
			} else if i+1 < len(args) {
				i++
				value = args[i]
			} else {
				return nil, fmt.Errorf("flag needs an argument: --%s", name)
			}
		}
		if err := global.Set(name, value); err != nil {
			return nil, fmt.Errorf("invalid argument %q for --%s: %w", value, name, err)
		}
	}
	return rest, nil
}

// singleDashLong matches `-name` or `-name=value` with a name longer than
// one letter.
var singleDashLong = regexp.MustCompile(`^-([a-z][a-z0-9-]+)(=.*)?$`)

// singleDashLongFlags rewrites `-name` to `--name` wherever name is a long
// flag of the command args name (or a global flag): the CLI took Go-style
// single-dash flags (`-help`, `-json`) before it was built on cobra, and
// scripts still pass them. After `--` nothing is rewritten.
func singleDashLongFlags(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		cmd = root
	}
	known := func(name string) bool {
		if name == "help" {
			return true
		}
		return cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil || root.PersistentFlags().Lookup(name) != nil
	}
	out := make([]string, len(args))
	for i, a := range args {
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		out[i] = a
		if m := singleDashLong.FindStringSubmatch(a); m != nil && known(m[1]) {
			out[i] = "-" + a
		}
	}
	return out
}
