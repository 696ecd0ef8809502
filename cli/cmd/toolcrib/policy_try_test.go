package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/condition"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"
)

// Grant conditions through the CLI against a real registry: grant
// --condition (and a refused one with its position), policy show, policy
// test (admitted, unmet, an evaluation error, no scope), export keeps the
// condition and apply sets and clears it.
func TestGrantConditionsThroughTheCLI(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{})
	admin := r.Auth.Admin(t)
	mustCLI(t, r, admin, "server", "register", "--owner", "tenant-a/group:billing-team",
		"--url", "https://billing.example.test/mcp", "--trust", "first-party", "billing")
	mustCLI(t, r, admin, "tenant", "put", "tenant-a")
	mustCLI(t, r, admin, "audience", "put", "--server", "billing", "tenant-a.ops")

	out := mustCLI(t, r, admin, "grant", "--group", "support", "--scope", "refund:write", "--audience", "tenant-a.ops",
		"--condition", condition.AmountExample, "tenant-a")
	wantLines(t, out, `condition\s+double\(args\.amount\) <= 500\.0`)
	_, err := cli(t, r, admin, "grant", "--group", "support", "--condition", `user.name == "x"`, "tenant-a")
	if msg := describe(err); !strings.Contains(msg, "InvalidArgument") || !strings.Contains(msg, "condition: 1:1: undeclared reference to 'user'") {
		t.Fatalf("a condition naming an unknown variable: %q", msg)
	}
	wantLines(t, mustCLI(t, r, admin, "policy", "show", "tenant-a"), `group:support\s+refund:write\s+tenant-a\.ops\s+double\(args\.amount\)`)

	r.Discovery.Commit("billing", "tenant-a.ops", registrytest.Tool("billing", "create_refund", "Create a refund.", "refund_id"))
	r.WaitTool(t, "billing.create_refund", func(*registryv1.Tool) bool { return true })
	contract := filepath.Join(t.TempDir(), "contract.yaml")
	if err := os.WriteFile(contract, []byte("tool_id: billing.create_refund\neffect: write\nscope: refund:write\n"+
		"authorization: caller-and-tenant\nallowed_fields: [refund_id]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, r, admin, "contract", "publish", "--file", contract, "billing.create_refund")

	try := func(args ...string) string {
		return mustCLI(t, r, admin, append([]string{"policy", "test", "tenant-a", "--tool", "billing.create_refund"}, args...)...)
	}
	wantLines(t, try("--subject", "sam", "--group", "support", "--args", `{"amount": 120}`),
		`audience class\s+tenant-a\.ops`, `group:support\s+double.*\s+true`, `verdict\s+admitted by the condition of grant group:support`)
	wantLines(t, try("--subject", "sam", "--group", "support", "--args", `{"amount": 900}`),
		`group:support\s+.*\s+false`, `verdict\s+not admitted: the condition of grant group:support is not met \(Check: CONDITION_UNMET\)`)
	wantLines(t, try("--subject", "fran", "--group", "support,finance-leads", "--args", `{"amount": 900}`),
		`verdict\s+admitted by the condition of grant group:support`)
	wantLines(t, try("--group", "support", "--args", `{}`),
		`group:support\s+.*\s+error`, `could not be evaluated \(Check: CONDITION_UNMET, fail closed\)`)
	wantLines(t, try("--group", "auditors", "--args", `{}`), `verdict\s+no grant of the principal gives an audience class`)
	if _, err := cli(t, r, admin, "policy", "test", "tenant-a", "--tool", "billing.create_refund", "--group", "support", "--args", `[1]`); err == nil {
		t.Fatal("--args that is not an object was accepted")
	}
	// export keeps the condition; apply clears and sets it.
	exported := mustCLI(t, r, admin, "export")
	if !strings.Contains(exported, "condition: double(args.amount) <= 500.0") {
		t.Fatalf("export lost the condition:\n%s", exported)
	}
	cleared := writeFile(t, "cleared.yaml", strings.Replace(exported, "condition: double(args.amount) <= 500.0 || \"finance-leads\" in principal.groups", "", 1))
	if cleared == "" || strings.Contains(mustRead(t, cleared), "condition:") {
		t.Fatalf("the test could not remove the condition from the file")
	}
	wantLines(t, mustCLI(t, r, admin, "diff", "-f", cleared), `(?m)^~ grant tenant-a/group:support: clear condition$`)
	mustCLI(t, r, admin, "apply", "-f", cleared)
	wantLines(t, mustCLI(t, r, admin, "policy", "show", "tenant-a"), `group:support\s+refund:write\s+tenant-a\.ops\s+-`)
	back := writeFile(t, "back.yaml", exported)
	wantLines(t, mustCLI(t, r, admin, "diff", "-f", back), `(?m)^~ grant tenant-a/group:support: set condition$`)
	mustCLI(t, r, admin, "apply", "-f", back)
	wantNoChanges(t, r, admin, back)

	// What the request and the token give: --run-id, --time, --mode and
	// --claim reach request.run_id, request.time, request.mode and
	// principal.claims.
	for group, cond := range map[string]string{"writers": condition.RunExample, "day-shift": condition.WindowExample,
		"confirmed": `request.mode == "USER_CONFIRMED"`, "cost-owners": `"department" in principal.claims && principal.claims["department"] == "finance"`} {
		mustCLI(t, r, admin, "grant", "--group", group, "--scope", "refund:write", "--audience", "tenant-a.ops", "--condition", cond, "tenant-a")
	}
	for _, tc := range []struct {
		group string
		flags []string
		want  string
	}{
		{"writers", []string{"--run-id", "run-7"}, "admitted by the condition of grant group:writers"},
		{"writers", nil, "the condition of grant group:writers is not met"},
		{"day-shift", []string{"--time", "2026-12-02T08:00:00Z"}, "admitted by the condition of grant group:day-shift"},
		{"day-shift", []string{"--time", "2026-12-02T22:30:00Z"}, "the condition of grant group:day-shift is not met"},
		{"confirmed", []string{"--mode", "user-confirmed"}, "admitted by the condition of grant group:confirmed"},
		{"confirmed", nil, "the condition of grant group:confirmed is not met"},
		{"cost-owners", []string{"--claim", "department=finance"}, "admitted by the condition of grant group:cost-owners"},
		{"cost-owners", []string{"--claim", "department=sales"}, "the condition of grant group:cost-owners is not met"},
	} {
		wantLines(t, try(append([]string{"--subject", "wes", "--group", tc.group}, tc.flags...)...), `verdict\s+.*`+regexp.QuoteMeta(tc.want))
	}
	if _, err := cli(t, r, admin, "policy", "test", "tenant-a", "--tool", "billing.create_refund", "--group", "day-shift", "--time", "8 pm"); err == nil {
		t.Fatal("a --time that is not RFC 3339 was accepted")
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
