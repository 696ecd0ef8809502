package main

import (
	"bytes"
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"
)

// The CLI as a newcomer following the README meets it (issue 13, point 7).

// reviewedTool registers logistics, tenant-a's class reading it, and a
// scanned logistics.shipment_status with a published contract.
func reviewedTool(t *testing.T, r *registrytest.Registry, admin string, contract ...string) {
	t.Helper()
	mustCLI(t, r, admin, "server", "register", "--owner", "tenant-a/group:logistics-platform",
		"--url", "https://logistics.example.test/mcp", "--trust", "first-party", "logistics")
	mustCLI(t, r, admin, "tenant", "put", "tenant-a")
	mustCLI(t, r, admin, "audience", "put", "--server", "logistics", "tenant-a.readers")
	r.Discovery.Commit("logistics", "tenant-a.readers",
		registrytest.Tool("logistics", "shipment_status", "Query the current status of a shipment.", "shipment_id", "status"))
	r.WaitTool(t, "logistics.shipment_status", func(*registryv1.Tool) bool { return true })
	mustCLI(t, r, admin, append(append([]string{"contract", "publish", "--effect", "read-only", "--scope", "shipment:read",
		"--authorization", "caller"}, contract...), "logistics.shipment_status")...)
}

// `tool list` prints the approval digest whole (it is the one to copy);
// a digest cut short, as tables print the others, is refused before any
// call with the full digest to copy, and nothing is approved.
func TestApproveWithAShortDigestNamesTheFullOne(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{})
	admin := r.Auth.Admin(t)
	reviewedTool(t, r, admin)
	out := mustCLI(t, r, admin, "tool", "list")
	m := regexp.MustCompile(`logistics\.shipment_status\s+unreviewed\s+.*\s(sha256:[0-9a-f]{64})\s`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("tool list does not print the approval digest whole:\n%s", out)
	}
	full := m[1]
	for _, short := range []string{shortDigest(full), full[:len("sha256:")+12] + "...", full[:len("sha256:")+12]} {
		_, err := cli(t, r, admin, "tool", "approve", "logistics.shipment_status", short)
		msg := describe(err)
		if err == nil || !strings.Contains(msg, "is not a full approval digest") || !strings.Contains(msg, "\n  "+full) ||
			strings.Contains(msg, "required") {
			t.Fatalf("approve %q: %v", short, msg)
		}
	}
	// Not the start of any digest awaiting approval: refused, none offered.
	_, err := cli(t, r, admin, "tool", "approve", "logistics.shipment_status", "sha256:0000")
	if msg := describe(err); err == nil || !strings.Contains(msg, "is not a full approval digest") || strings.Contains(msg, full) {
		t.Fatalf("approve sha256:0000: %v", msg)
	}
	wantLines(t, mustCLI(t, r, admin, "tool", "show", "logistics.shipment_status"), `review state\s+unreviewed`)
	wantLines(t, mustCLI(t, r, admin, "tool", "approve", "logistics.shipment_status", full), `review state\s+approved`)
}

// `audience put` on an existing class updates it from its current version
// (its help says "create or update"); --version keeps the compare-and-set.
func TestAudiencePutUpdatesAnExistingClass(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{})
	admin := r.Auth.Admin(t)
	for _, s := range []string{"logistics", "billing"} {
		mustCLI(t, r, admin, "server", "register", "--owner", "tenant-a/group:ops", "--url", "https://"+s+".example.test/mcp",
			"--trust", "first-party", s)
	}
	mustCLI(t, r, admin, "tenant", "put", "tenant-a")
	wantLines(t, mustCLI(t, r, admin, "audience", "put", "--server", "logistics", "tenant-a.readers"), `version\s+1`)
	out := mustCLI(t, r, admin, "audience", "put", "--server", "logistics", "--server", "billing",
		"--description", "readers of both", "tenant-a.readers")
	wantLines(t, out, `version\s+2`, `servers\s+.*billing`)
	_, err := cli(t, r, admin, "audience", "put", "--version", "1", "--server", "logistics", "tenant-a.readers")
	if status.Code(err) != codes.Aborted {
		t.Fatalf("a stale --version: %v", describe(err))
	}
	wantLines(t, mustCLI(t, r, admin, "audience", "list"), `tenant-a\.readers\s+tenant-a\s+.*billing.*\s+2\n`)
}

// `tool show` says what an empty allowed-fields list means (no projection)
// rather than printing `[]`.
func TestToolShowExplainsAllowedFields(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{})
	admin := r.Auth.Admin(t)
	reviewedTool(t, r, admin)
	out := mustCLI(t, r, admin, "tool", "show", "logistics.shipment_status")
	wantLines(t, out, `allowed fields all \(no projection: every result field reaches the agent\), required evidence none`)
	if strings.Contains(out, "[]") {
		t.Fatalf("tool show prints an empty list:\n%s", out)
	}
	out = mustCLI(t, r, admin, "contract", "publish", "--effect", "read-only", "--scope", "shipment:read", "--authorization", "caller",
		"--allowed-fields", "shipment_id,status", "--required-evidence", "shipment_id", "logistics.shipment_status")
	wantLines(t, out, `allowed fields \[shipment_id, status\] \(only these result fields reach the agent\), required evidence \[shipment_id\]`)
}

// A flag after the arguments is taken as a flag; after `--` everything is
// an argument.
func TestFlagsAfterArguments(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{})
	admin := r.Auth.Admin(t)
	reviewedTool(t, r, admin)
	out := mustCLI(t, r, admin, "tool", "show", "logistics.shipment_status", "--no-history")
	if strings.Contains(out, "EVENT") {
		t.Fatalf("--no-history after the argument was ignored:\n%s", out)
	}
	full := digestRe.FindStringSubmatch(out)[1]
	out = mustCLI(t, r, admin, "tool", "approve", "logistics.shipment_status", full, "--comment", "read it")
	wantLines(t, out, `review state\s+approved`)

	for _, c := range []struct {
		args, positional []string
		comment          string
	}{
		{[]string{"a", "--comment", "x", "b"}, []string{"a", "b"}, "x"},
		{[]string{"--comment=x", "a"}, []string{"a"}, "x"},
		{[]string{"a", "--", "--comment", "b"}, []string{"a", "--comment", "b"}, ""},
		{[]string{"a", "-"}, []string{"a", "-"}, ""},
	} {
		var comment string
		var got []string
		cmd := withFlags(&cobra.Command{Use: "t", RunE: func(_ *cobra.Command, a []string) error { got = a; return nil }},
			func(fs *pflag.FlagSet) { fs.StringVar(&comment, "comment", "", "") })
		cmd.SetArgs(c.args)
		err := cmd.Execute()
		if err != nil || !slices.Equal(got, c.positional) || comment != c.comment {
			t.Errorf("t %q: arguments %q, comment %q, %v; want %q, %q", c.args, got, comment, err, c.positional, c.comment)
		}
	}
}

// The dev admin token is found from any directory below the one `make run`
// ran in; where there is none, the Unauthenticated code is printed once.
func TestDevTokenIsFoundUpward(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{})
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".toolcrib", "dev"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, devAdminTokenFile), []byte(r.Auth.Admin(t)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "services", "registry")
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(deep)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"--registry", r.Addr, "tenant", "put", "tenant-a"}, &out, &errOut); err != nil {
		t.Fatalf("from %s: %s", deep, describe(err))
	}

	t.Chdir(t.TempDir()) // no .toolcrib/dev above this one
	err := run(context.Background(), []string{"--registry", r.Addr, "server", "list"}, &out, &errOut)
	msg := describe(err)
	if status.Code(err) != codes.Unauthenticated || strings.Count(msg, "Unauthenticated") != 1 ||
		!strings.Contains(msg, "no token was sent: "+devAdminTokenFile+" does not exist here or in any parent directory") {
		t.Fatalf("without a token: %q", msg)
	}
}
