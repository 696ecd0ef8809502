package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// cli runs `toolcrib` against r with token and returns stdout, or the
// error as the CLI would print it.
func cli(t *testing.T, r *registrytest.Registry, token string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	full := append([]string{"--registry", r.Addr, "--token", token, "--timeout", "10s"}, args...)
	err := run(ctx, full, &out, &errOut)
	return out.String(), err
}

func mustCLI(t *testing.T, r *registrytest.Registry, token string, args ...string) string {
	t.Helper()
	out, err := cli(t, r, token, args...)
	if err != nil {
		t.Fatalf("toolcrib %s: %s", strings.Join(args, " "), describe(err))
	}
	return out
}

func wantLines(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Fatalf("output does not match %q:\n%s", p, out)
		}
	}
}

var digestRe = regexp.MustCompile(`approval digest\s+(sha256:[0-9a-f]{64})`)

// The review flow of docs/concepts/review.md, command by command, against a
// real registry: register, audience class, grant, a scan makes the tool
// appear pending, publish from a YAML file, show the digest, approve it,
// enable, disable, roll back, revoke, show the policy, watch.
func TestReviewFlowThroughTheCLI(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{})
	admin := r.Auth.Admin(t)

	out := mustCLI(t, r, admin, "server", "register", "--owner", "tenant-a/group:logistics-platform",
		"--url", "https://logistics.example.test/mcp", "--trust", "first-party", "--scan-interval", "5m", "logistics")
	wantLines(t, out, `server\s+logistics`, `trust\s+first-party`, `revision source\s+server-provided`, `version\s+1 `)
	mustCLI(t, r, admin, "tenant", "put", "--display-name", "Tenant A", "tenant-a")
	out = mustCLI(t, r, admin, "audience", "put", "--server", "logistics=env:LOGISTICS_TOKEN", "tenant-a.readers")
	wantLines(t, out, `servers\s+logistics=env:LOGISTICS_TOKEN`, `policy epoch\s+2`)
	out = mustCLI(t, r, admin, "grant", "--group", "readers", "--scope", "shipment:read,order:read",
		"--audience", "tenant-a.readers", "tenant-a")
	wantLines(t, out, `scopes\s+order:read, shipment:read`, `policy epoch\s+3`)

	// A scan commits the tool: it appears pending and disabled.
	r.Discovery.Commit("logistics", "tenant-a.readers",
		registrytest.Tool("logistics", "shipment_status", "Query the current status of a shipment.", "shipment_id", "status", "updated_at"))
	r.WaitTool(t, "logistics.shipment_status", func(*registryv1.Tool) bool { return true })
	out = mustCLI(t, r, admin, "tool", "list", "--state", "pending")
	wantLines(t, out, `logistics\.shipment_status\s+pending-contract\s+no\s+yes\s+-\s+-`)

	contractYAML := filepath.Join(t.TempDir(), "contract.yaml")
	if err := os.WriteFile(contractYAML, []byte(`tool_id: logistics.shipment_status
effect: read-only
scope: shipment:read
authorization: caller-and-tenant
deadline_ms: 2000
downstream_mapping: {destination: shipments-api, operation: "GET /shipments/{id}"}
allowed_fields: [shipment_id, status, updated_at]
required_evidence: [shipment_id, updated_at]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out = mustCLI(t, r, admin, "contract", "publish", "--file", contractYAML, "logistics.shipment_status")
	wantLines(t, out, `review state\s+unreviewed`, `contract\s+v1: effect read-only, scope shipment:read`, `result budget gateway default, sampling refused`,
		`toolcrib tool approve logistics.shipment_status sha256:`)
	first := digestRe.FindStringSubmatch(out)[1]

	// A negative result budget is refused by the registry, naming the field.
	_, err := cli(t, r, admin, "contract", "publish", "--file", contractYAML, "--result-budget", "-5", "logistics.shipment_status")
	if err == nil || !strings.Contains(describe(err), "InvalidArgument") || !strings.Contains(describe(err), "result_budget_bytes") {
		t.Fatalf("publishing a negative result budget: %v", err)
	}

	// Flags override the file: a second contract gets a new digest.
	out = mustCLI(t, r, admin, "contract", "publish", "--file", contractYAML, "--deadline-ms", "3000", "--result-budget", "4096", "logistics.shipment_status")
	wantLines(t, out, `deadline 3000ms`)
	out = mustCLI(t, r, admin, "tool", "show", "logistics.shipment_status")
	wantLines(t, out, `result budget 4096 bytes`, `description\s+"Query the current status of a shipment\."`, `DISCOVERED\s+discovery`, `PUBLISHED\s+test-admin\s+v2`)
	current := digestRe.FindStringSubmatch(out)[1]

	_, err = cli(t, r, admin, "tool", "approve", "logistics.shipment_status", first)
	if err == nil || !strings.Contains(describe(err), "FailedPrecondition") || !strings.Contains(describe(err), "not the current approval digest") {
		t.Fatalf("approving a stale digest: %v", err)
	}
	out = mustCLI(t, r, admin, "tool", "approve", "--comment", "reviewed v2", "logistics.shipment_status", current)
	wantLines(t, out, `review state\s+approved`, `approvals\s+`+current+` v2 by test-admin`)
	wantLines(t, mustCLI(t, r, admin, "tool", "enable", "logistics.shipment_status"), `enabled\s+yes`)
	wantLines(t, mustCLI(t, r, admin, "tool", "disable", "--reason", "incident 42", "logistics.shipment_status"), `enabled\s+no \(incident 42\)`)
	_, err = cli(t, r, admin, "tool", "rollback", "logistics.shipment_status")
	if err == nil || !strings.Contains(describe(err), "FailedPrecondition") {
		t.Fatalf("rollback with one approval: %v", err)
	}

	// A contract that contradicts itself: each problem on its own line.
	_, err = cli(t, r, admin, "contract", "publish", "--file", contractYAML,
		"--allowed-fields", "shipment_id,status", "--scope", "", "logistics.shipment_status")
	msg := describe(err)
	for _, want := range []string{"InvalidArgument", "\n  contract.allowed_fields: drops \"updated_at\"",
		"\n  contract.required_evidence[1]: \"updated_at\" is not in allowed_fields", "\n  contract.scope: required"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q does not contain %q", msg, want)
		}
	}

	out = mustCLI(t, r, admin, "revoke", "--group", "readers", "--scope", "order:read", "tenant-a")
	wantLines(t, out, `scopes\s+shipment:read`)
	out = mustCLI(t, r, admin, "policy", "show", "tenant-a")
	wantLines(t, out, `policy epoch\s+\d+`, `group:readers\s+shipment:read\s+tenant-a.readers`, `tenant-a.readers\s+logistics=env:LOGISTICS_TOKEN\s+1`)

	out = mustCLI(t, r, admin, "watch", "--from", "0", "--count", "4")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "#1 ") || !strings.Contains(lines[0], "server logistics") ||
		!strings.Contains(lines[3], "policy tenant-a epoch 2 (audience_class)") {
		t.Fatalf("watch:\n%s", out)
	}

	// --json gives protojson, one object per line for watch.
	out = mustCLI(t, r, admin, "--json", "tool", "show", "--no-history", "logistics.shipment_status")
	var shown struct {
		Tool struct {
			ApprovalDigest string `json:"approvalDigest"`
			ReviewState    string `json:"reviewState"`
		} `json:"tool"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil || shown.Tool.ApprovalDigest != current || shown.Tool.ReviewState != "REVIEW_STATE_APPROVED" {
		t.Fatalf("--json tool show: %v\n%s", err, out)
	}
	out = mustCLI(t, r, admin, "--json", "watch", "--from", "1", "--count", "2")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["change"] == nil {
			t.Fatalf("--json watch line %q: %v", line, err)
		}
	}
	out = mustCLI(t, r, admin, "--json", "server", "list")
	var servers struct {
		Servers []struct {
			ServerID string `json:"serverId"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(out), &servers); err != nil || len(servers.Servers) != 1 || servers.Servers[0].ServerID != "logistics" {
		t.Fatalf("--json server list: %v\n%s", err, out)
	}

	// A user who is not an admin is refused admin commands with a clear
	// error; unauthenticated calls too.
	_, err = cli(t, r, r.Auth.User(t, "mallory", "tenant-a"), "tenant", "put", "tenant-x")
	if err == nil || !strings.HasPrefix(describe(err), "PermissionDenied") {
		t.Fatalf("user runs an admin command: %v", err)
	}
	_, err = cli(t, r, "", "--token-file", "", "server", "list")
	if err == nil || !strings.HasPrefix(describe(err), "Unauthenticated") {
		t.Fatalf("no token: %v", err)
	}
}

// Every command, group or not, has help text: `--help` and `help <command>`
// print its usage line and summary on stdout and exit 0.
func TestEveryCommandHasHelp(t *testing.T) {
	root, err := newRoot(&env{}, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c == root || c.Name() == "help" || c.Name() == "completion" && c.Parent() == root || c.Parent() != nil && c.Parent().Name() == "completion" {
			return
		}
		n++
		path := strings.Fields(c.CommandPath())[1:]
		for _, args := range [][]string{append(append([]string{}, path...), "--help"), append([]string{"help"}, path...)} {
			var out, errOut bytes.Buffer
			if err := run(context.Background(), args, &out, &errOut); err != nil || errOut.Len() != 0 {
				t.Fatalf("toolcrib %s: %v %s", strings.Join(args, " "), err, errOut.String())
			}
			if !strings.HasPrefix(out.String(), "Usage: "+c.CommandPath()) || c.Short == "" || !strings.Contains(out.String(), c.Short) {
				t.Errorf("help of %q:\n%s", c.CommandPath(), out.String())
			}
		}
	}
	walk(root)
	if n < 50 {
		t.Fatalf("%d commands walked, want every one (more than 50)", n)
	}
	var out bytes.Buffer
	_ = run(context.Background(), []string{"help", "tool", "approve"}, &out, &out)
	if !strings.Contains(out.String(), "-comment") {
		t.Fatalf("tool approve help lacks its flag:\n%s", out.String())
	}
}

// Without a token the CLI says why the call was refused and how to get one.
func TestMissingTokenIsExplained(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{})
	var out, errOut bytes.Buffer
	missing := filepath.Join(t.TempDir(), "admin-token")
	err := run(context.Background(), []string{"--registry", r.Addr, "--token-file", missing, "server", "list"}, &out, &errOut)
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "no token was sent: "+missing+" does not exist") {
		t.Fatalf("err = %v", err)
	}
}

// `tool show` lists the variants: which audience class sees which
// descriptor, each with its own approval digest and review state; the
// publish hint names every digest to approve; a tenant's user sees only
// its own classes' variants, and a tool only another tenant saw is not
// found.
func TestToolShowListsVariantsPerAudienceClass(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{})
	admin := r.Auth.Admin(t)
	mustCLI(t, r, admin, "server", "register", "--owner", "tenant-a/group:logistics-platform",
		"--url", "https://logistics.example.test/mcp", "--trust", "first-party", "logistics")
	for _, tn := range []string{"tenant-a", "tenant-b"} {
		mustCLI(t, r, admin, "tenant", "put", tn)
		mustCLI(t, r, admin, "audience", "put", "--server", "logistics", tn+".readers")
	}
	va := registrytest.Tool("logistics", "shipment_status", "Query the current status of a shipment.")
	vb := registrytest.Tool("logistics", "shipment_status", "TENANT-B PRIVATE: query and repair a shipment.")
	r.Discovery.Commit("logistics", "tenant-a.readers", va)
	r.Discovery.Commit("logistics", "tenant-b.readers", vb, registrytest.Tool("logistics", "b_only", "TENANT-B PRIVATE"))
	r.WaitTool(t, "logistics.b_only", func(*registryv1.Tool) bool { return true })
	r.WaitTool(t, "logistics.shipment_status", func(tl *registryv1.Tool) bool { return len(tl.GetVariants()) == 2 })

	out := mustCLI(t, r, admin, "contract", "publish", "--effect", "read-only", "--scope", "shipment:read",
		"--authorization", "caller", "logistics.shipment_status")
	hints := regexp.MustCompile(`toolcrib tool approve logistics\.shipment_status (sha256:[0-9a-f]{64})`).FindAllStringSubmatch(out, -1)
	if len(hints) != 2 || hints[0][1] == hints[1][1] {
		t.Fatalf("publish should name one digest per descriptor:\n%s", out)
	}
	mustCLI(t, r, admin, "tool", "approve", "logistics.shipment_status", hints[0][1])
	out = mustCLI(t, r, admin, "tool", "show", "logistics.shipment_status")
	wantLines(t, out, `CLASS\s+REVIEW STATE\s+AT SOURCE\s+GENERATION\s+DESCRIPTOR DIGEST\s+APPROVAL DIGEST\s+DESCRIPTION`,
		`tenant-a\.readers\s+approved\s+yes\s+1\s+sha256:[0-9a-f]{12}…\s+`+hints[0][1]+`\s+"Query the current status of a shipment\."`,
		`tenant-b\.readers\s+unreviewed\s+yes\s+1\s+sha256:[0-9a-f]{12}…\s+`+hints[1][1]+`\s+"TENANT-B PRIVATE: query and repair a shipment\."`,
		`DISCOVERED\s+discovery\s+-\s+\S+\s+-\s+tenant-b\.readers`)
	out = mustCLI(t, r, admin, "tool", "list")
	wantLines(t, out, `logistics\.shipment_status\s+.*\s+1/2\n`, `logistics\.b_only\s+.*\s+0/1\n`)

	userA := r.Auth.User(t, "alice", "tenant-a")
	out = mustCLI(t, r, userA, "tool", "show", "logistics.shipment_status")
	wantLines(t, out, `tenant-a\.readers\s+approved`)
	if strings.Contains(out, "tenant-b") || strings.Contains(out, "TENANT-B") {
		t.Fatalf("tenant-a sees tenant-b's variant:\n%s", out)
	}
	_, err := cli(t, r, userA, "tool", "show", "logistics.b_only")
	if status.Code(err) != codes.NotFound || strings.Contains(describe(err), "TENANT-B") {
		t.Fatalf("tenant-a showing tenant-b's tool: %v", err)
	}
	if out := mustCLI(t, r, userA, "tool", "list"); strings.Contains(out, "b_only") {
		t.Fatalf("tenant-a lists tenant-b's tool:\n%s", out)
	}
}
