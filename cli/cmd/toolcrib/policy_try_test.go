package main

import (
	"os"
	"path/filepath"
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
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
