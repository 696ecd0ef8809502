package registry_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/services/registry"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

func withURL(id, url string) *registryv1.Server {
	s := logisticsServer()
	s.ServerId = id
	s.GetStreamableHttp().Url = url
	return s
}

// Issue 8.4: the four URLs the issue registered are refused under the
// default egress policy, each with a field violation naming the rule, on
// RegisterServer and on UpdateServer; an operator's CIDR lets an internal
// server in, never a metadata address.
func TestRegistrationRefusesURLsTheEgressPolicyForbids(t *testing.T) {
	t.Parallel()
	r, ctx, admin := startFixture(t)
	for _, c := range []struct{ url, rule string }{
		{"https://169.254.169.254/latest/meta-data/", "rule metadata"},
		{"https://10.0.0.1/mcp", "rule private-address"},
		{"https://metadata.google.internal/computeMetadata/v1/", "rule metadata"},
		{"http://127.0.0.1:5432/", "rule loopback"},
		{"https://[fe80::1]/mcp", "rule link-local"},
		{"https://[fd00:ec2::254]/latest", "rule metadata"},
	} {
		_, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: withURL("probe", c.url)})
		vs := wantFields(t, err, "server.streamable_http.url")
		if !strings.Contains(vs[0].description, c.rule) {
			t.Errorf("%s: description %q does not name %q", c.url, vs[0].description, c.rule)
		}
		got, err := admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: server})
		if err != nil {
			t.Fatal(err)
		}
		upd := proto.Clone(got.GetServer()).(*registryv1.Server)
		upd.GetStreamableHttp().Url = c.url
		_, err = admin.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: upd, ExpectedVersion: got.GetServer().GetVersion()})
		vs = wantFields(t, err, "server.streamable_http.url")
		if !strings.Contains(vs[0].description, c.rule) {
			t.Errorf("update %s: description %q does not name %q", c.url, vs[0].description, c.rule)
		}
	}
	if _, err := admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: "probe"}); err == nil {
		t.Fatal("a refused server was stored")
	}
	_ = r

	internal := registrytest.Start(t, registrytest.Options{NoDiscovery: true, Configure: func(c *registry.Config) {
		c.Egress.AllowCIDRs = "10.0.0.0/8,169.254.0.0/16"
	}})
	ia := internal.Admin(t)
	if _, err := ia.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: withURL("internal", "https://10.0.0.1/mcp")}); err != nil {
		t.Fatalf("an allowed CIDR was refused: %v", err)
	}
	_, err := ia.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: withURL("imds", "https://169.254.169.254/")})
	wantFields(t, err, "server.streamable_http.url")
}

// Issue 8.4: DeleteServer is admin only (see
// TestAdminRPCsNeedAnAdminCredential), refused while an audience class
// covers the server, checks the version, and removes the server with the
// tools discovery reported for it.
func TestDeleteServerIsRefusedWhileAClassCoversIt(t *testing.T) {
	t.Parallel()
	r, ctx, admin := startWithTool(t, "Look up a shipment.")
	_, err := admin.DeleteServer(ctx, &registryv1.DeleteServerRequest{ServerId: server, ExpectedVersion: 1})
	wantCode(t, err, codes.FailedPrecondition, "SERVER_IN_USE")
	if vs := violations(err); len(vs) != 1 || !strings.Contains(vs[0].description, class) {
		t.Fatalf("violations %v, want one naming %s", vs, class)
	}
	if _, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: class, TenantId: tenant}, ExpectedVersion: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = admin.DeleteServer(ctx, &registryv1.DeleteServerRequest{ServerId: server, ExpectedVersion: 7})
	wantCode(t, err, codes.Aborted, "VERSION_MISMATCH")
	_, err = admin.DeleteServer(ctx, &registryv1.DeleteServerRequest{ServerId: "nope", ExpectedVersion: 1})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")
	resp, err := admin.DeleteServer(ctx, &registryv1.DeleteServerRequest{ServerId: server, ExpectedVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetServer().GetServerId() != server || len(resp.GetDeletedToolIds()) != 1 || resp.GetDeletedToolIds()[0] != toolID {
		t.Fatalf("deleted %v", resp)
	}
	_, err = admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: server})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")
	_, err = admin.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")
	// The id is free again.
	if _, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: logisticsServer()}); err != nil {
		t.Fatal(err)
	}
	_ = r
}

// Issue 8.5: secret references are confined at PutAudienceClass: the dev
// admin token's file, a symlink in the secret directory that leaves it, a
// path outside it and an env: variable without the configured prefix are
// refused with a field violation naming the rule and never the value.
func TestPutAudienceClassConfinesSecretReferences(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	secrets, dev := filepath.Join(base, "secrets"), filepath.Join(base, ".toolcrib", "dev")
	for _, d := range []string{secrets, dev} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	adminToken := filepath.Join(dev, "admin-token")
	if err := os.WriteFile(adminToken, []byte("admin"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "logistics"), []byte("up"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(adminToken, filepath.Join(secrets, "escape")); err != nil {
		t.Fatal(err)
	}
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true, Configure: func(c *registry.Config) {
		c.Secrets.Dirs = secrets
	}})
	setup(t, r)
	ctx, admin := ctxT(t), r.Admin(t)
	n := 0
	put := func(ref string) error {
		n++
		_, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
			Name: fmt.Sprintf("tenant-a.other%d", n), TenantId: tenant, Servers: []*registryv1.AudienceServer{{ServerId: server, SecretRef: ref}}}})
		return err
	}
	for ref, rule := range map[string]string{
		"file:" + adminToken:                       "rule outside-secret-dirs",
		"file:" + filepath.Join(secrets, "escape"): "rule outside-secret-dirs",
		"file:/etc/passwd":                         "rule outside-secret-dirs",
		"env:TOOLCRIB_POSTGRES_URL":                "rule env-prefix",
		"env:AWS_SECRET_ACCESS_KEY":                "rule env-prefix",
	} {
		vs := wantFields(t, put(ref), "audience_class.servers[0].secret_ref")
		if !strings.Contains(vs[0].description, rule) || strings.Contains(vs[0].description, strings.TrimPrefix(strings.TrimPrefix(ref, "file:"), "env:")) {
			t.Errorf("%s: description %q (want %q, no value)", ref, vs[0].description, rule)
		}
	}
	for _, ref := range []string{"file:" + filepath.Join(secrets, "logistics"), "env:TOOLCRIB_SECRET_LOGISTICS"} {
		if err := put(ref); err != nil {
			t.Errorf("%s refused: %v", ref, err)
		}
	}
}

// Issue 8.7: stdio commands and arguments and one-line names with control
// characters (newline, ESC, …) or bidi overrides are refused per field.
func TestControlCharactersAreRefused(t *testing.T) {
	t.Parallel()
	_, ctx, admin := startFixture(t)
	s := logisticsServer()
	s.ServerId, s.DisplayName = "stdio", "Name\x1b]0;pwned\x07"
	s.Transport = &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: "mcp\nrm -rf /",
		Args: []string{"--ok", "--evil\x1b[2J", "tab\there", "\u202egnp.exe"}}}
	_, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: s})
	wantFields(t, err, "server.display_name", "server.stdio.args[1]", "server.stdio.args[2]", "server.stdio.args[3]", "server.stdio.command")
	_, err = admin.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: "tenant-c", DisplayName: "C\nD"}})
	wantFields(t, err, "tenant.display_name")
}

// syncBuffer is a log sink shared by the service's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Issue 8.6: megabyte ids in every id field of the registry's RPCs are
// refused with INVALID_ARGUMENT and a bounded answer, and the log (the
// access log included) holds no more than a bounded prefix of them.
func TestHugeIDsAreNotEchoed(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true, Configure: func(c *registry.Config) {
		c.LogOutput = logs
	}})
	setup(t, r)
	ctx, admin := ctxT(t), r.Admin(t)
	huge := strings.Repeat("x", 3_900_000)
	calls := map[string]func() error{
		"GetServer": func() error {
			_, err := admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: huge})
			return err
		},
		"DeleteServer": func() error {
			_, err := admin.DeleteServer(ctx, &registryv1.DeleteServerRequest{ServerId: huge, ExpectedVersion: 1})
			return err
		},
		"GetTool": func() error {
			_, err := admin.GetTool(ctx, &registryv1.GetToolRequest{ToolId: huge})
			return err
		},
		"GetAudienceClass": func() error {
			_, err := admin.GetAudienceClass(ctx, &registryv1.GetAudienceClassRequest{Name: huge})
			return err
		},
		"GetPolicy": func() error {
			_, err := admin.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: huge})
			return err
		},
		"ApproveTool": func() error {
			_, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: huge})
			return err
		},
		"GrantScopes": func() error {
			_, err := admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Subject: huge, Scopes: []string{"a"}})
			return err
		},
		"GetBinding": func() error {
			_, err := admin.GetBinding(ctx, &registryv1.GetBindingRequest{ServerId: huge, AudienceClass: "c"})
			return err
		},
		"GetBindings": func() error {
			_, err := admin.GetBindings(ctx, &registryv1.GetBindingsRequest{Reads: []*registryv1.GetBindingRequest{{ServerId: huge, AudienceClass: "c"}}})
			return err
		},
		"PinIdentities": func() error {
			_, err := admin.PinIdentities(ctx, &registryv1.PinIdentitiesRequest{Pins: []*registryv1.IdentityPin{{ServerId: huge, ExpectedVersion: 1,
				IdentityPin: "sha256:" + strings.Repeat("a", 64)}}})
			return err
		},
		"SetRolloutStage": func() error {
			_, err := admin.SetRolloutStage(ctx, &registryv1.SetRolloutStageRequest{ServerId: "s", AudienceClass: "c",
				Stage: registryv1.Stage_STAGE_SHADOW, Reason: huge})
			return err
		},
		"GetRolloutStage": func() error {
			_, err := admin.GetRolloutStage(ctx, &registryv1.GetRolloutStageRequest{ServerId: "s", AudienceClass: huge})
			return err
		},
		"ListRolloutStages": func() error {
			_, err := admin.ListRolloutStages(ctx, &registryv1.ListRolloutStagesRequest{TenantId: huge})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		wantCode(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
		if n := len(errorText(err)); n > 4*apierror.MaxMessage {
			t.Errorf("%s: the answer carries %d bytes", name, n)
		}
	}
	if n := len(logs.String()); n > 64<<10 {
		t.Fatalf("the log grew by %d bytes for %d calls", n, len(calls))
	}
}

// errorText is every text an error status carries: message, ErrorInfo
// metadata and field violations.
func errorText(err error) string {
	st := status.Convert(err)
	var b strings.Builder
	b.WriteString(st.Message())
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			for k, v := range d.GetMetadata() {
				b.WriteString(k + v)
			}
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				b.WriteString(v.GetField() + v.GetDescription())
			}
		}
	}
	return b.String()
}

// Issue 20.8: a stdio server's pinned directory is stored with it, read
// back by GetServer and ListServers, changed by an admin's update, and
// refused unless it is an absolute, clean path (a field violation naming
// stdio.pin_dir).
func TestStdioPinDirIsStoredAndValidated(t *testing.T) {
	t.Parallel()
	_, ctx, admin := startFixture(t)
	s := logisticsServer()
	s.ServerId = "pinned"
	s.Transport = &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: "node", Args: []string{"server.js"}, PinDir: "/opt/mcp/pinned"}}
	reg, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: s})
	if err != nil {
		t.Fatal(err)
	}
	got, err := admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: "pinned"})
	if err != nil || got.GetServer().GetStdio().GetPinDir() != "/opt/mcp/pinned" {
		t.Fatalf("GetServer: %v %v", got, err)
	}
	list, err := admin.ListServers(ctx, &registryv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	listed := ""
	for _, l := range list.GetServers() {
		if l.GetServerId() == "pinned" {
			listed = l.GetStdio().GetPinDir()
		}
	}
	if listed != "/opt/mcp/pinned" {
		t.Fatalf("ListServers: %v", list)
	}
	upd := proto.Clone(reg.GetServer()).(*registryv1.Server)
	upd.GetStdio().PinDir = "/opt/mcp/pinned-v2"
	if out, err := admin.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: upd, ExpectedVersion: reg.GetServer().GetVersion()}); err != nil ||
		out.GetServer().GetStdio().GetPinDir() != "/opt/mcp/pinned-v2" {
		t.Fatalf("UpdateServer: %v %v", out, err)
	}
	for _, bad := range []string{"relative/dir", "/opt/../etc", "/opt/mcp/", "/", "/opt/mcp\nx"} {
		s.ServerId = "bad"
		s.GetStdio().PinDir = bad
		_, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: s})
		wantFields(t, err, "server.stdio.pin_dir")
	}
}
