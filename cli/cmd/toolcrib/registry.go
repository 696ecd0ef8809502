package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
)

// registryClient dials the registry.
func (e *env) registryClient() (registryv1.RegistryServiceClient, error) {
	c, err := e.dial(e.registryAddr)
	if err != nil {
		return nil, err
	}
	return registryv1.NewRegistryServiceClient(c), nil
}

// callRegistry runs one unary call with the per-call deadline.
func callRegistry[T any](ctx context.Context, e *env, call func(context.Context, registryv1.RegistryServiceClient) (T, error)) (T, error) {
	var zero T
	c, err := e.registryClient()
	if err != nil {
		return zero, err
	}
	ctx, cancel := e.callCtx(ctx)
	defer cancel()
	return call(ctx, c)
}

// listFlag collects a repeatable flag; each value may also be a
// comma-separated list.
type listFlag []string

// Type names the value in help.
func (l *listFlag) Type() string { return "list" }

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// parseEnum accepts an enum value in any common spelling: `read-only`,
// `READ_ONLY` or the full `EFFECT_CLASS_READ_ONLY`.
func parseEnum(what, value, prefix string, values map[string]int32) (int32, error) {
	if value == "" {
		return 0, nil
	}
	name := strings.ToUpper(strings.ReplaceAll(value, "-", "_"))
	if !strings.HasPrefix(name, prefix) {
		name = prefix + name
	}
	v, ok := values[name]
	if !ok || v == 0 {
		var names []string
		for n, v := range values {
			if v != 0 {
				names = append(names, strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(n, prefix), "_", "-")))
			}
		}
		return 0, fmt.Errorf("%s %q: not one of %s", what, value, strings.Join(slices.Sorted(slices.Values(names)), ", "))
	}
	return v, nil
}

// enumName is the short, lower-case spelling of an enum value name.
func enumName(full, prefix string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(full, prefix), "_", "-"))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// transport is the server's transport on one line, every part escaped.
func transport(s *registryv1.Server) string {
	if st := s.GetStdio(); st != nil {
		parts := []string{"stdio:", safe(st.GetCommand())}
		for _, a := range st.GetArgs() {
			parts = append(parts, safe(a))
		}
		return strings.TrimSpace(strings.Join(parts, " "))
	}
	return safe(s.GetStreamableHttp().GetUrl())
}

func printServer(w io.Writer, s *registryv1.Server) {
	fmt.Fprintf(w, "server\t%s\n", s.GetServerId())
	if s.GetDisplayName() != "" {
		fmt.Fprintf(w, "name\t%s\n", safe(s.GetDisplayName()))
	}
	fmt.Fprintf(w, "owner\t%s\n", safe(s.GetOwner()))
	fmt.Fprintf(w, "transport\t%s\n", transport(s))
	if d := s.GetStdio().GetPinDir(); d != "" {
		fmt.Fprintf(w, "pinned directory\t%s\n", safe(d))
	}
	fmt.Fprintf(w, "trust\t%s\n", enumName(s.GetTrustLevel().String(), "TRUST_LEVEL_"))
	fmt.Fprintf(w, "revision source\t%s\n", enumName(s.GetRevisionSource().String(), "REVISION_SOURCE_"))
	fmt.Fprintf(w, "identity pin\t%s\n", orDash(s.GetIdentityPin()))
	if s.GetScanInterval() != nil {
		fmt.Fprintf(w, "scan interval\t%s\n", s.GetScanInterval().AsDuration())
	}
	fmt.Fprintf(w, "version\t%d (updated %s)\n", s.GetVersion(), when(s.GetUpdatedAt()))
}

// grantRequest is what `grant` and `revoke` send: who, and which scopes
// and audience classes.
type grantRequest struct {
	subject, group  string
	scopes, classes listFlag
	// condition and clearCondition: `grant` only.
	condition      string
	clearCondition bool
}

func (g *grantRequest) flags(fs *pflag.FlagSet) {
	fs.StringVar(&g.subject, "subject", "", "the subject (token sub) the grant is for")
	fs.StringVar(&g.group, "group", "", "the group (token groups claim) the grant is for")
	fs.Var(&g.scopes, "scope", "a scope, e.g. shipment:read (repeat or comma-separate)")
	fs.Var(&g.classes, "audience", "an audience class of the tenant (repeat or comma-separate)")
}

func printGrant(w io.Writer, g *registryv1.Grant, epoch int64) {
	who := "subject " + g.GetSubject()
	if g.GetGroup() != "" {
		who = "group " + g.GetGroup()
	}
	fmt.Fprintf(w, "tenant\t%s\n", g.GetTenantId())
	fmt.Fprintf(w, "grant to\t%s\n", who)
	fmt.Fprintf(w, "scopes\t%s\n", orDash(strings.Join(g.GetScopes(), ", ")))
	fmt.Fprintf(w, "audience classes\t%s\n", orDash(strings.Join(g.GetAudienceClasses(), ", ")))
	fmt.Fprintf(w, "condition\t%s\n", orDash(g.GetCondition()))
	fmt.Fprintf(w, "policy epoch\t%d\n", epoch)
}

// grantScopesCommand is `toolcrib grant`.
func grantScopesCommand(e *env) *cobra.Command {
	g := &grantRequest{}
	cmd := grantCommand(e, g, "grant", "grant a subject or group of a tenant scopes and audience classes (admin); bumps the tenant's policy epoch",
		func(ctx context.Context, c registryv1.RegistryServiceClient, tenant string) (grantResponse, error) {
			return c.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Subject: g.subject, Group: g.group, Scopes: g.scopes,
				AudienceClasses: g.classes, Condition: g.condition, ClearCondition: g.clearCondition})
		})
	cmd.Flags().StringVar(&g.condition, "condition", "", "a CEL condition the grant counts under, replacing any it had (docs/concepts/conditions.md), e.g. 'request.run_id != \"\"'")
	cmd.Flags().BoolVar(&g.clearCondition, "clear-condition", false, "remove the grant's condition")
	return cmd
}

// revokeScopesCommand is `toolcrib revoke`.
func revokeScopesCommand(e *env) *cobra.Command {
	g := &grantRequest{}
	return grantCommand(e, g, "revoke", "revoke scopes and audience classes from a subject's or group's grant (admin); bumps the tenant's policy epoch",
		func(ctx context.Context, c registryv1.RegistryServiceClient, tenant string) (grantResponse, error) {
			return c.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenant, Subject: g.subject, Group: g.group, Scopes: g.scopes, AudienceClasses: g.classes})
		})
}

// grantResponse is what GrantScopes and RevokeScopes answer.
type grantResponse interface {
	proto.Message
	GetGrant() *registryv1.Grant
	GetPolicyEpoch() int64
}

// grantCommand is `grant` or `revoke`: the same flags, another RPC.
func grantCommand(e *env, g *grantRequest, name, summary string,
	call func(context.Context, registryv1.RegistryServiceClient, string) (grantResponse, error)) *cobra.Command {
	return withFlags(&cobra.Command{
		Use: name + " <tenant-id>", Short: summary,
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := needArgs(a, 1, "<tenant-id>"); err != nil {
				return err
			}
			resp, err := callRegistry(cmd.Context(), e, func(ctx context.Context, c registryv1.RegistryServiceClient) (grantResponse, error) {
				return call(ctx, c, a[0])
			})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) { printGrant(w, resp.GetGrant(), resp.GetPolicyEpoch()) })
		},
	}, g.flags)
}

// classServers lists a class's servers with their secret references (the
// references, never a credential).
func classServers(ac *registryv1.AudienceClass) string {
	var out []string
	for _, s := range ac.GetServers() {
		if s.GetSecretRef() != "" {
			out = append(out, s.GetServerId()+"="+s.GetSecretRef())
		} else {
			out = append(out, s.GetServerId())
		}
	}
	return orDash(strings.Join(out, ", "))
}

func printAudienceClass(w io.Writer, ac *registryv1.AudienceClass) {
	fmt.Fprintf(w, "audience class\t%s\n", ac.GetName())
	fmt.Fprintf(w, "tenant\t%s\n", ac.GetTenantId())
	fmt.Fprintf(w, "servers\t%s\n", classServers(ac))
	fmt.Fprintf(w, "version\t%d\n", ac.GetVersion())
}

// watchCommand is `toolcrib watch` (the registry's change stream).
func watchCommand(e *env) *cobra.Command {
	var (
		from       int64
		count      int
		heartbeats bool
	)
	return withFlags(&cobra.Command{
		Use: "watch",
		Short: "stream registry changes in commit order (admin or service); resume with --from <last revision seen>. " +
			"With --json, one JSON object per line",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 0, "no arguments"); err != nil {
				return err
			}
			c, err := e.registryClient()
			if err != nil {
				return err
			}
			stream, err := c.Watch(ctx, &registryv1.WatchRequest{FromRevision: from})
			if err != nil {
				return err
			}
			return printRegistryWatch(ctx, e, stream, from, count, heartbeats)
		},
	}, func(fs *pflag.FlagSet) {
		fs.Int64Var(&from, "from", 0, "show changes after this revision; 0 for every change still kept")
		fs.IntVar(&count, "count", 0, "stop after this many changes; 0 streams until interrupted")
		fs.BoolVar(&heartbeats, "heartbeats", false, "also print heartbeats")
	})
}

// printRegistryWatch prints a registry Watch stream until count changes
// (0: until the stream or ctx ends); from is the revision it resumes after,
// named when the registry ends the stream.
func printRegistryWatch(ctx context.Context, e *env, stream grpc.ServerStreamingClient[registryv1.WatchResponse], from int64, count int, heartbeats bool) error {
	seen := 0
	for count == 0 || seen < count {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) || errors.Is(changelog.StreamError(err), changelog.ErrDraining) {
			fmt.Fprintln(e.stderr, "toolcrib: the registry ended the stream (shutting down); resume with --from", from)
			return nil
		}
		if err != nil {
			if stoppedByCaller(ctx, err) {
				return nil
			}
			return err
		}
		if msg.GetHeartbeat() != nil && !heartbeats {
			continue
		}
		if ch := msg.GetChange(); ch != nil {
			from = ch.GetRevision()
			seen++
		}
		if e.asJSON {
			b, err := protojson.Marshal(msg)
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, string(b))
			continue
		}
		fmt.Fprintln(e.stdout, describeWatch(msg))
	}
	return nil
}

// describeWatch is one readable line per Watch message.
func describeWatch(msg *registryv1.WatchResponse) string {
	if hb := msg.GetHeartbeat(); hb != nil {
		return fmt.Sprintf("heartbeat  head=%d  %s", hb.GetRevision(), when(hb.GetSentAt()))
	}
	ch := msg.GetChange()
	head := fmt.Sprintf("#%d  %s  %-7s", ch.GetRevision(), when(ch.GetCommittedAt()), enumName(ch.GetKind().String(), "CHANGE_KIND_"))
	switch o := ch.GetObject().(type) {
	case *registryv1.Change_Server:
		return fmt.Sprintf("%s  server %s (owner %s, version %d)", head, o.Server.GetServerId(), o.Server.GetOwner(), o.Server.GetVersion())
	case *registryv1.Change_Tenant:
		return fmt.Sprintf("%s  tenant %s", head, o.Tenant.GetTenantId())
	case *registryv1.Change_AudienceClass:
		return fmt.Sprintf("%s  audience class %s (%s)", head, o.AudienceClass.GetName(), classServers(o.AudienceClass))
	case *registryv1.Change_Tool:
		t := o.Tool
		return fmt.Sprintf("%s  tool %s %s enabled=%s present=%s approval=%s", head, t.GetToolId(),
			enumName(t.GetReviewState().String(), "REVIEW_STATE_"), yesNo(t.GetEnabled()), yesNo(t.GetPresentAtSource()), shortDigest(t.GetApprovalDigest()))
	case *registryv1.Change_Policy:
		p := o.Policy
		line := fmt.Sprintf("%s  policy %s epoch %d (%s)", head, p.GetTenantId(), p.GetPolicyEpoch(), strings.ToLower(p.GetCause()))
		if g := p.GetGrant(); g != nil {
			who := g.GetSubject()
			if g.GetGroup() != "" {
				who = "group:" + g.GetGroup()
			}
			line += fmt.Sprintf(" %s: scopes [%s] classes [%s]", who, strings.Join(g.GetScopes(), ","), strings.Join(g.GetAudienceClasses(), ","))
		}
		return line
	case *registryv1.Change_RolloutStage:
		st := o.RolloutStage
		return fmt.Sprintf("%s  rollout %s/%s %s (version %d, epoch %d): %s", head, st.GetAudienceClass(), st.GetServerId(),
			stageText(st), st.GetVersion(), st.GetPolicyEpoch(), safeText(st.GetReason()))
	}
	return head
}

// effectName is the short name of an effect class.
func effectName(e catalogv1.EffectClass) string { return enumName(e.String(), "EFFECT_CLASS_") }

// serverDeleteCommand is `toolcrib server delete`.
func serverDeleteCommand(e *env) *cobra.Command {
	var expectedVersion int64
	return withFlags(&cobra.Command{
		Use: "delete <server-id>",
		Short: "delete a server (admin) with the tools discovered from it; refused while an audience class covers it. " +
			"--version 0 deletes the version read just before",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<server-id>"); err != nil {
				return err
			}
			version := expectedVersion
			if version == 0 {
				cur, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.GetServerResponse, error) {
					return c.GetServer(ctx, &registryv1.GetServerRequest{ServerId: a[0]})
				})
				if err != nil {
					return err
				}
				version = cur.GetServer().GetVersion()
			}
			resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.DeleteServerResponse, error) {
				return c.DeleteServer(ctx, &registryv1.DeleteServerRequest{ServerId: a[0], ExpectedVersion: version})
			})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "deleted\t%s (version %d)\n", safe(resp.GetServer().GetServerId()), resp.GetServer().GetVersion())
				fmt.Fprintf(w, "tools deleted\t%d\n", len(resp.GetDeletedToolIds()))
				for _, id := range resp.GetDeletedToolIds() {
					fmt.Fprintf(w, "\t%s\n", safe(id))
				}
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.Int64Var(&expectedVersion, "version", 0, "the server version to delete; 0 reads the current one first")
	})
}

// serverShowCommand is `toolcrib server show`.
func serverShowCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "show <server-id>",
		Short: "show one registered server: owner, transport, trust level, identity pin and record version",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<server-id>"); err != nil {
				return err
			}
			resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.GetServerResponse, error) {
				return c.GetServer(ctx, &registryv1.GetServerRequest{ServerId: a[0]})
			})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) { printServer(w, resp.GetServer()) })
		},
	}
}

// serverListCommand is `toolcrib server list`.
func serverListCommand(e *env) *cobra.Command {
	var pageSize int
	return withFlags(&cobra.Command{
		Use:   "list",
		Short: "list registered servers",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 0, "no arguments"); err != nil {
				return err
			}
			all := &registryv1.ListServersResponse{}
			for {
				resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.ListServersResponse, error) {
					return c.ListServers(ctx, &registryv1.ListServersRequest{PageSize: int32(pageSize), PageToken: all.GetNextPageToken()})
				})
				if err != nil {
					return err
				}
				all.Servers, all.NextPageToken, all.Revision = append(all.Servers, resp.GetServers()...), resp.GetNextPageToken(), resp.GetRevision()
				if all.NextPageToken == "" {
					break
				}
			}
			return e.output(all, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "SERVER\tOWNER\tTRANSPORT\tTRUST\tPIN\tVERSION")
				for _, s := range all.GetServers() {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", safe(s.GetServerId()), safe(s.GetOwner()), transport(s),
						enumName(s.GetTrustLevel().String(), "TRUST_LEVEL_"), shortDigest(s.GetIdentityPin()), s.GetVersion())
				}
				fmt.Fprintf(w, "(%d servers, registry revision %d)\n", len(all.GetServers()), all.GetRevision())
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.IntVar(&pageSize, "page-size", 0, "servers per request; every page is fetched")
	})
}

// serverRegisterCommand is `toolcrib server register`.
func serverRegisterCommand(e *env) *cobra.Command {
	var owner, url, stdioCmd, trust, revSource, pin, displayName, description, pinDir string
	var args listFlag
	var scanInterval time.Duration
	return withFlags(&cobra.Command{
		Use:   "register <server-id>",
		Short: "register an MCP server (admin): its owner, transport (--url or --command), trust level and revision source",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<server-id>"); err != nil {
				return err
			}
			s := &registryv1.Server{ServerId: a[0], Owner: owner, IdentityPin: pin, DisplayName: displayName, Description: description}
			switch {
			case url != "" && stdioCmd != "":
				return errors.New("give --url or --command, not both")
			case url != "":
				s.Transport = &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: url}}
			case stdioCmd != "":
				s.Transport = &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: stdioCmd, Args: args, PinDir: pinDir}}
			}
			if pinDir != "" && stdioCmd == "" {
				return errors.New("--pin-dir pins a stdio server's directory: give it with --command")
			}
			t, err := parseEnum("--trust", trust, "TRUST_LEVEL_", registryv1.TrustLevel_value)
			if err != nil {
				return err
			}
			rs, err := parseEnum("--revision-source", revSource, "REVISION_SOURCE_", registryv1.RevisionSource_value)
			if err != nil {
				return err
			}
			s.TrustLevel, s.RevisionSource = registryv1.TrustLevel(t), registryv1.RevisionSource(rs)
			if scanInterval != 0 {
				s.ScanInterval = durationpb.New(scanInterval)
			}
			resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.RegisterServerResponse, error) {
				return c.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: s})
			})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) { printServer(w, resp.GetServer()) })
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&owner, "owner", "", "owner of the server's tools, who may approve them: <tenant>/group:<group> or <tenant>/user:<subject> (required)")
		fs.StringVar(&url, "url", "", "streamable HTTP endpoint, https:// (http:// only to loopback)")
		fs.StringVar(&stdioCmd, "command", "", "stdio: the command starting the server")
		fs.Var(&args, "arg", "stdio: an argument of the command (repeat for several)")
		fs.StringVar(&pinDir, "pin-dir", "", "stdio: absolute path of a directory (the server's package) whose whole tree is part of its identity")
		fs.StringVar(&trust, "trust", "", "trust level: first-party, partner or third-party (required)")
		fs.StringVar(&revSource, "revision-source", "server-provided", "catalog revision source: server-provided or none")
		fs.StringVar(&pin, "identity-pin", "", "sha256:<hex> identity pin; empty pins on the first scan")
		fs.DurationVar(&scanInterval, "scan-interval", 0, "how often discovery rescans; 0 for discovery's default")
		fs.StringVar(&displayName, "display-name", "", "human-readable name")
		fs.StringVar(&description, "description", "", "free text for operators")
	})
}

// policyShowCommand is `toolcrib policy show`.
func policyShowCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "show <tenant-id>",
		Short: "show a tenant's policy epoch, grants and audience classes",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<tenant-id>"); err != nil {
				return err
			}
			resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.GetPolicyResponse, error) {
				return c.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: a[0]})
			})
			if err != nil {
				return err
			}
			p := resp.GetPolicy()
			return e.output(resp, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "tenant\t%s\npolicy epoch\t%d\nregistry revision\t%d\n\n", p.GetTenantId(), p.GetPolicyEpoch(), resp.GetRevision())
				fmt.Fprintln(w, "GRANT TO\tSCOPES\tAUDIENCE CLASSES\tCONDITION\tUPDATED")
				for _, g := range p.GetGrants() {
					who := g.GetSubject()
					if g.GetGroup() != "" {
						who = "group:" + g.GetGroup()
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", who, orDash(strings.Join(g.GetScopes(), ",")),
						orDash(strings.Join(g.GetAudienceClasses(), ",")), orDash(oneLine(g.GetCondition())), when(g.GetUpdatedAt()))
				}
				fmt.Fprintln(w, "\nAUDIENCE CLASS\tSERVERS\tVERSION")
				for _, ac := range p.GetAudienceClasses() {
					fmt.Fprintf(w, "%s\t%s\t%d\n", ac.GetName(), classServers(ac), ac.GetVersion())
				}
			})
		},
	}
}

// audienceListCommand is `toolcrib audience list`.
func audienceListCommand(e *env) *cobra.Command {
	var tenantFilter, serverFilter string
	return withFlags(&cobra.Command{
		Use:   "list",
		Short: "list audience classes (--tenant and --server filter)",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 0, "no arguments"); err != nil {
				return err
			}
			resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.ListAudienceClassesResponse, error) {
				return c.ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{TenantId: tenantFilter, ServerId: serverFilter, PageSize: 1000})
			})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "CLASS\tTENANT\tSERVERS\tVERSION")
				for _, ac := range resp.GetAudienceClasses() {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", ac.GetName(), ac.GetTenantId(), classServers(ac), ac.GetVersion())
				}
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&tenantFilter, "tenant", "", "only classes of this tenant")
		fs.StringVar(&serverFilter, "server", "", "only classes reading this server")
	})
}

// audiencePutCommand is `toolcrib audience put`.
func audiencePutCommand(e *env) *cobra.Command {
	var description string
	var servers listFlag
	var version int64
	return withFlags(&cobra.Command{
		Use: "put <tenant-id>.<class>",
		Short: "create or update an audience class (admin): the servers it reads, each with a secret reference " +
			"(env:NAME or file:/path) for the upstream credential; bumps the tenant's policy epoch",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<tenant-id>.<class>"); err != nil {
				return err
			}
			tenant, _, _ := strings.Cut(a[0], ".")
			ac := &registryv1.AudienceClass{Name: a[0], TenantId: tenant, Description: description}
			for _, s := range servers {
				id, ref, _ := strings.Cut(s, "=")
				ac.Servers = append(ac.Servers, &registryv1.AudienceServer{ServerId: id, SecretRef: ref})
			}
			put := func(v int64) (*registryv1.PutAudienceClassResponse, error) {
				return callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.PutAudienceClassResponse, error) {
					return c.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: ac, ExpectedVersion: v})
				})
			}
			resp, err := put(version)
			if status.Code(err) == codes.AlreadyExists && version == 0 {
				// Without --version an existing class is updated from the
				// version read now; --version keeps the compare-and-set.
				cur, gerr := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.GetAudienceClassResponse, error) {
					return c.GetAudienceClass(ctx, &registryv1.GetAudienceClassRequest{Name: a[0]})
				})
				if gerr != nil {
					return gerr
				}
				read := cur.GetAudienceClass().GetVersion()
				if resp, err = put(read); err == nil {
					fmt.Fprintf(e.stderr, "toolcrib: %s existed at version %d; updated it (servers and description replaced by these)\n", a[0], read)
				}
			}
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				printAudienceClass(w, resp.GetAudienceClass())
				fmt.Fprintf(w, "policy epoch\t%d\n", resp.GetPolicyEpoch())
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.Var(&servers, "server", "a server the class reads: <server-id> or <server-id>=<secret-ref> (repeat for several)")
		fs.StringVar(&description, "description", "", "free text")
		fs.Int64Var(&version, "version", 0, "the version you read, to update only if nobody changed it since (a stale one is refused); "+
			"0 creates the class, or updates an existing one from its current version")
	})
}

// tenantPutCommand is `toolcrib tenant put`.
func tenantPutCommand(e *env) *cobra.Command {
	var displayName string
	return withFlags(&cobra.Command{
		Use:   "put <tenant-id>",
		Short: "create a tenant (at policy epoch 1) or change its display name (admin)",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<tenant-id>"); err != nil {
				return err
			}
			resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.PutTenantResponse, error) {
				return c.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: a[0], DisplayName: displayName}})
			})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "tenant\t%s\npolicy epoch\t%d\n", resp.GetTenant().GetTenantId(), resp.GetTenant().GetPolicyEpoch())
			})
		},
	}, func(fs *pflag.FlagSet) { fs.StringVar(&displayName, "display-name", "", "human-readable name") })
}

// serverGroup is `toolcrib server …`.
func serverGroup(e *env) *cobra.Command {
	return group("server", "register, list, show and delete MCP servers",
		serverRegisterCommand(e), serverListCommand(e), serverShowCommand(e), serverDeleteCommand(e))
}

// tenantGroup is `toolcrib tenant …`.
func tenantGroup(e *env) *cobra.Command {
	return group("tenant", "create tenants", tenantPutCommand(e))
}

// audienceGroup is `toolcrib audience …`.
func audienceGroup(e *env) *cobra.Command {
	return group("audience", "audience classes: which servers a tenant's agents read, with which credential",
		audiencePutCommand(e), audienceListCommand(e))
}

// policyGroup is `toolcrib policy …`.
func policyGroup(e *env) *cobra.Command {
	return group("policy", "a tenant's policy: epoch, grants and audience classes", policyShowCommand(e), policyTestCommand(e))
}
