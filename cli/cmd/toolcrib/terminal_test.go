package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"
)

// rawControl reports whether out holds a raw control character other than
// the layout's newline and tab, or a bidirectional override.
func rawControl(out string) bool {
	return strings.ContainsFunc(out, func(r rune) bool { return unsafeRune(r, true) })
}

func TestTerminalWriterEscapes(t *testing.T) {
	var b bytes.Buffer
	w := newTerminalWriter(&b)
	in := "ok\tcell\n\x1b]0;pwned\x07 \u202egnp.exe é\r\u0085\xff\n"
	// Byte by byte: a rune split across writes is still recognised.
	for i := 0; i < len(in); i++ {
		if _, err := w.Write([]byte{in[i]}); err != nil {
			t.Fatal(err)
		}
	}
	want := "ok\tcell\n\\x1b]0;pwned\\x07 \\u202egnp.exe é\\r\\u0085\\xff\n"
	if b.String() != want {
		t.Fatalf("got  %q\nwant %q", b.String(), want)
	}
	if got := safe("a\nb\tc\x1b"); got != `a\nb\tc\x1b` {
		t.Fatalf("safe: %q", got)
	}
}

// Issue 8.7: server data carrying terminal escapes, newlines and bidi
// overrides (here served by a registry that does not refuse them) is
// printed escaped by `server list` and `server show`, as text and as JSON.
func TestServerDataIsPrintedEscaped(t *testing.T) {
	auth := servicetest.NewAuth(t)
	reg, regAddr := discoverytest.StartRegistry(t, auth)
	reg.PutServer(&registryv1.Server{ServerId: "evil", Owner: "team\x1b[8m", DisplayName: "Evil\nserver  FIRST_PARTY",
		TrustLevel: registryv1.TrustLevel_TRUST_LEVEL_THIRD_PARTY,
		Transport: &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: "mcp\x1b]0;pwned\x07",
			Args: []string{"--x\x1b[2J", "\u202egnp.exe"}}}})
	for _, args := range [][]string{{"server", "list"}, {"server", "show", "evil"}, {"--json", "server", "show", "evil"}} {
		var out, errOut bytes.Buffer
		all := append([]string{"--registry", regAddr, "--token", auth.Admin(t)}, args...)
		if err := run(context.Background(), all, &out, &errOut); err != nil {
			t.Fatalf("%v: %v %s", args, err, errOut.String())
		}
		if rawControl(out.String()) {
			t.Fatalf("%v printed a raw control character:\n%q", args, out.String())
		}
		if !strings.Contains(out.String(), `\u001b`) && !strings.Contains(out.String(), `\x1b`) {
			t.Fatalf("%v: the escape is not shown escaped:\n%s", args, out.String())
		}
	}
	var out, errOut bytes.Buffer
	_ = run(context.Background(), []string{"--registry", regAddr, "--token", auth.Admin(t), "server", "show", "evil"}, &out, &errOut)
	if !strings.Contains(out.String(), `Evil\nserver`) {
		t.Fatalf("a newline in a one-line field was not escaped:\n%s", out.String())
	}
}

// Issue 8.4: `toolcrib server delete` is refused while a class covers the
// server (exit with the registry's FAILED_PRECONDITION), then deletes it.
func TestServerDeleteCommand(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true})
	admin := r.Auth.Admin(t)
	cli := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"--registry", r.Addr, "--token", admin}, args...), &out, &errOut)
		return out.String(), err
	}
	if _, err := cli("server", "register", "--owner", "tenant-a/group:team", "--url", "https://mcp.example.test/mcp", "--trust", "first-party", "logistics"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli("tenant", "put", "tenant-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli("audience", "put", "--server", "logistics", "tenant-a.readers"); err != nil {
		t.Fatal(err)
	}
	_, err := cli("server", "delete", "logistics")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(describe(err), "tenant-a.readers") {
		t.Fatalf("delete while covered: %v", describe(err))
	}
	if _, err := cli("audience", "put", "--version", "1", "tenant-a.readers"); err != nil {
		t.Fatal(err)
	}
	out, err := cli("server", "delete", "logistics")
	if err != nil || !strings.Contains(out, "deleted") {
		t.Fatalf("delete: %q %v", out, err)
	}
	if _, err := cli("server", "show", "logistics"); status.Code(err) != codes.NotFound {
		t.Fatalf("show after delete: %v", err)
	}
}
