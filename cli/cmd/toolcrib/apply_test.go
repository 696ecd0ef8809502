package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

const baseRegistryFile = `version: 1
tenants:
  - id: tenant-a
    display_name: Tenant A
servers:
  - id: logistics
    owner: tenant-a/group:logistics-platform
    url: https://logistics.example.test/mcp
    trust: first-party
    scan_interval: 5m
audience_classes:
  - name: tenant-a.readers
    servers:
      - server: logistics
        secret_ref: env:LOGISTICS_TOKEN
grants:
  - tenant: tenant-a
    group: readers
    scopes: [shipment:read, order:read]
    audience_classes: [tenant-a.readers]
rollout:
  - server: logistics
    audience_class: tenant-a.readers
    stage: canary
    reason: new catalog, read-only for 5% of runs
`

const contractEntryYAML = `contracts:
  - tool_id: logistics.shipment_status
    effect: read-only
    scope: shipment:read
    authorization: caller-and-tenant
    deadline_ms: 2000
    downstream_mapping: {destination: shipments-api, operation: "GET /shipments/{id}"}
    allowed_fields: [shipment_id, status, updated_at]
    required_evidence: [shipment_id, updated_at]
    result_budget_bytes: 4096
    allow_sampling: true
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func tenantEpoch(t *testing.T, r *registrytest.Registry) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.Admin(t).GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: "tenant-a"})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetPolicy().GetPolicyEpoch()
}

func headRevision(t *testing.T, r *registrytest.Registry) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.Admin(t).ListServers(ctx, &registryv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetRevision()
}

// wantNoChanges applies file again and checks that nothing was written:
// the plan is empty and the registry's log head did not move.
func wantNoChanges(t *testing.T, r *registrytest.Registry, admin, file string) {
	t.Helper()
	before := headRevision(t, r)
	out := mustCLI(t, r, admin, "apply", "-f", file)
	wantLines(t, out, `no changes: the registry matches the file`, `applied 0 change\(s\)`)
	if after := headRevision(t, r); after != before {
		t.Fatalf("a second apply moved the registry from revision %d to %d:\n%s", before, after, out)
	}
}

// The declarative registry, end to end against a real registry: diff shows
// the plan, apply makes it, a second apply changes nothing; a contract is
// published from the file; a pinned approval digest approves exactly that
// version and a pinned digest that is not current is reported and not
// approved; export writes a file that applies as no change; --prune
// revokes a grant the file dropped.
func TestApplyDiffExport(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{})
	admin := r.Auth.Admin(t)
	base := writeFile(t, "registry.yaml", baseRegistryFile)

	out := mustCLI(t, r, admin, "diff", "-f", base)
	wantLines(t, out, `(?m)^\+ tenant tenant-a$`, `(?m)^\+ server logistics$`, `(?m)^\+ audience class tenant-a.readers \(-\)$`,
		`(?m)^~ audience class tenant-a.readers: servers logistics=env:LOGISTICS_TOKEN, once their rollout stages are set$`,
		`(?m)^\+ grant tenant-a/group:readers: add scopes \[order:read,shipment:read\] classes \[tenant-a.readers\]$`,
		`(?m)^~ rollout tenant-a.readers/logistics: full \(never set\) → canary 5% read-only$`)
	if got := headRevision(t, r); got != 0 {
		t.Fatalf("diff wrote to the registry (revision %d)", got)
	}
	var plan struct{ Changes, Notes []string }
	if err := json.Unmarshal([]byte(mustCLI(t, r, admin, "--json", "diff", "-f", base)), &plan); err != nil || len(plan.Changes) != 6 || len(plan.Notes) != 0 {
		t.Fatalf("diff --json: %+v, %v", plan, err)
	}
	out = mustCLI(t, r, admin, "apply", "-f", base)
	wantLines(t, out, `applied 6 change\(s\)`)
	wantNoChanges(t, r, admin, base)
	wantLines(t, mustCLI(t, r, admin, "rollout", "show", "logistics", "tenant-a.readers"), `stage\s+canary 5% read-only`,
		`reason\s+new catalog, read-only for 5% of runs`)

	// The order of the stage and the class: the stage was set before the
	// class covered the server, so the canary was in force from the start.
	hist := mustCLI(t, r, admin, "rollout", "history", "logistics", "tenant-a.readers")
	wantLines(t, hist, `(?m)^1\s+\d+\s+canary 5% read-only\s+test-admin`)

	// Discovery commits the tool; the file adds its contract.
	r.Discovery.Commit("logistics", "tenant-a.readers",
		registrytest.Tool("logistics", "shipment_status", "Query the current status of a shipment.", "shipment_id", "status", "updated_at"))
	r.WaitTool(t, "logistics.shipment_status", func(*registryv1.Tool) bool { return true })
	withContract := writeFile(t, "registry.yaml", baseRegistryFile+contractEntryYAML)
	wantLines(t, mustCLI(t, r, admin, "apply", "-f", withContract), `~ contract logistics.shipment_status: publish a new version`, `applied 1 change\(s\)`)
	wantNoChanges(t, r, admin, withContract)
	tool := r.WaitTool(t, "logistics.shipment_status", func(tl *registryv1.Tool) bool { return tl.GetContract() != nil })
	digest := tool.GetVariants()[0].GetApprovalDigest()
	if tool.GetVariants()[0].GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("published from the file: %v, want unreviewed (apply approves only pinned digests)", tool.GetVariants()[0])
	}

	// Pinned: the current digest and one that is not current.
	stale := "sha256:" + strings.Repeat("0", 64)
	pinned := writeFile(t, "registry.yaml", baseRegistryFile+contractEntryYAML+
		"    enabled: true\n    approved: ["+digest+", "+stale+"]\n")
	out = mustCLI(t, r, admin, "diff", "-f", pinned)
	wantLines(t, out, `~ tool logistics.shipment_status: approve pinned `+digest, `~ tool logistics.shipment_status: enable`,
		`! tool logistics.shipment_status: pinned approval digest `+stale+` is not current \(current: `+digest+`\); not approved`)
	wantLines(t, mustCLI(t, r, admin, "apply", "-f", pinned), `applied 2 change\(s\)`)
	tool = r.WaitTool(t, "logistics.shipment_status", func(tl *registryv1.Tool) bool { return tl.GetEnabled() })
	if v := tool.GetVariants()[0]; v.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED || len(tool.GetApprovals()) != 1 ||
		tool.GetApprovals()[0].GetApprovalDigest() != digest {
		t.Fatalf("after apply with a pinned digest: %v, approvals %v; want exactly %s approved", v, tool.GetApprovals(), digest)
	}
	before := headRevision(t, r)
	out = mustCLI(t, r, admin, "apply", "-f", pinned)
	wantLines(t, out, `no changes`, `pinned approval digest `+stale+` is not current`, `applied 0 change\(s\)`)
	if after := headRevision(t, r); after != before {
		t.Fatalf("second apply with pins moved the registry from %d to %d", before, after)
	}

	// export writes today's state; applied, it changes nothing.
	exported := mustCLI(t, r, admin, "export")
	wantLines(t, exported, `(?m)^version: 1$`, `result_budget_bytes: 4096`, `allow_sampling: true`, `approved:\n\s+- `+digest, `stage: canary`, `percent: 5`, `secret_ref: env:LOGISTICS_TOKEN`)
	wantNoChanges(t, r, admin, writeFile(t, "exported.yaml", exported))

	// --prune: the file drops the grant; diff without --prune leaves it,
	// with --prune revokes it.
	noGrant := strings.Replace(baseRegistryFile+contractEntryYAML, `grants:
  - tenant: tenant-a
    group: readers
    scopes: [shipment:read, order:read]
    audience_classes: [tenant-a.readers]
`, "", 1)
	noGrantFile := writeFile(t, "registry.yaml", noGrant)
	wantLines(t, mustCLI(t, r, admin, "diff", "-f", noGrantFile), `no changes`)
	wantLines(t, mustCLI(t, r, admin, "diff", "--prune", "-f", noGrantFile), `(?m)^- grant tenant-a/group:readers$`)
	epoch := tenantEpoch(t, r)
	wantLines(t, mustCLI(t, r, admin, "apply", "--prune", "-f", noGrantFile), `applied 1 change\(s\)`)
	if e := tenantEpoch(t, r); e != epoch+1 {
		t.Fatalf("prune of one grant: epoch %d → %d", epoch, e)
	}
	if out := mustCLI(t, r, admin, "policy", "show", "tenant-a"); strings.Contains(out, "group:readers") {
		t.Fatalf("grant still there after --prune:\n%s", out)
	}
}

// An invalid entry anywhere refuses the whole file before anything is
// written: every problem is listed, and the registry's log does not move.
func TestApplyRefusesTheWholeFile(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true})
	admin := r.Auth.Admin(t)
	bad := writeFile(t, "registry.yaml", baseRegistryFile+`  - server: logistics
    audience_class: tenant-a.writers
    stage: canary
    percent: 101
    effects: [read-only, teleport]
    reason: x
  - server: logistics
    audience_class: tenant-a.readers
    stage: shadow
    reason: ""
`+contractEntryYAML+`    approved: [not-a-digest]
`)
	_, err := cli(t, r, admin, "apply", "-f", bad)
	msg := describe(err)
	for _, want := range []string{
		"problem(s); nothing was written",
		`rollout[1] (tenant-a.writers/logistics): percent 101: must be 0..100`,
		`rollout[2] (tenant-a.readers/logistics): reason: required`,
		`contracts[0] (logistics.shipment_status).approved[0]: not a sha256:<hex> approval digest`,
	} {
		if !strings.Contains(msg, want) {
			t.Fatalf("refusal does not say %q:\n%s", want, msg)
		}
	}
	if got := headRevision(t, r); got != 0 {
		t.Fatalf("a refused file wrote to the registry (revision %d)", got)
	}
	unknownKey := writeFile(t, "registry.yaml", "version: 1\nservers:\n  - id: x\n    owner: tenant-a/group:g\n    colour: blue\n")
	if _, err := cli(t, r, admin, "apply", "-f", unknownKey); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("unknown key: %v", err)
	}
	dup := writeFile(t, "registry.yaml", baseRegistryFile+`  - server: logistics
    audience_class: tenant-a.readers
    stage: full
    reason: twice
`)
	if _, err := cli(t, r, admin, "apply", "-f", dup); err == nil || !strings.Contains(describe(err), `listed twice`) {
		t.Fatalf("a pair listed twice: %v", err)
	}
	if got := headRevision(t, r); got != 0 {
		t.Fatalf("refused files wrote to the registry (revision %d)", got)
	}
}

// `toolcrib rollout set|show|history` against a real registry, with the
// registry's refusals shown per field.
func TestRolloutCommands(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true})
	admin := r.Auth.Admin(t)
	mustCLI(t, r, admin, "apply", "-f", writeFile(t, "registry.yaml", strings.SplitN(baseRegistryFile, "rollout:", 2)[0]))

	wantLines(t, mustCLI(t, r, admin, "rollout", "show", "logistics", "tenant-a.readers"), `stage\s+full \(never set\)`)
	wantLines(t, mustCLI(t, r, admin, "rollout", "set", "--stage", "shadow", "--reason", "compare first", "logistics", "tenant-a.readers"),
		`stage\s+shadow`, `version\s+1`)
	wantLines(t, mustCLI(t, r, admin, "rollout", "set", "--stage", "canary", "--percent", "10", "--effects", "read-only,write",
		"--reason", "widen", "logistics", "tenant-a.readers"), `stage\s+canary 10% read-only,write`, `version\s+2`)
	wantLines(t, mustCLI(t, r, admin, "rollout", "set", "--stage", "canary", "--percent", "10", "--effects", "write,read-only",
		"--reason", "again", "logistics", "tenant-a.readers"), `changed\s+no: already at this stage`)
	_, err := cli(t, r, admin, "rollout", "set", "--stage", "canary", "--percent", "150", "logistics", "tenant-a.readers")
	if msg := describe(err); !strings.Contains(msg, "InvalidArgument") || !strings.Contains(msg, "\n  canary_percent: must be a percentage from 0 to 100") ||
		!strings.Contains(msg, "\n  reason: required") {
		t.Fatalf("bad set: %s", msg)
	}
	wantLines(t, mustCLI(t, r, admin, "rollout", "show"), `tenant-a.readers\s+logistics\s+canary 10% read-only,write\s+2\s+widen`)
	wantLines(t, mustCLI(t, r, admin, "rollout", "history", "logistics", "tenant-a.readers"),
		`now\s+canary 10% read-only,write`, `(?m)^1\s+\d+\s+shadow\s+test-admin\s+.*compare first$`, `(?m)^2\s+\d+\s+canary 10% read-only,write\s+test-admin\s+.*widen$`)
}

// The example registry file applies to a fresh registry as documented:
// the first apply registers everything and says the contract waits for
// the first scan; after the scan, the next apply publishes it and enables
// the tool; then nothing changes.
func TestExampleRegistryFile(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{})
	admin := r.Auth.Admin(t)
	example := filepath.Join("..", "..", "..", "examples", "registry.yaml")
	out := mustCLI(t, r, admin, "apply", "-f", example)
	wantLines(t, out, `! contract logistics.shipment_status: discovery has not committed the tool yet`, `applied 6 change\(s\)`)
	r.Discovery.Commit("logistics", "tenant-a.readers",
		registrytest.Tool("logistics", "shipment_status", "Query the current status of a shipment.", "shipment_id", "status", "updated_at"))
	r.WaitTool(t, "logistics.shipment_status", func(*registryv1.Tool) bool { return true })
	wantLines(t, mustCLI(t, r, admin, "apply", "-f", example), `~ contract logistics.shipment_status: publish a new version`,
		`~ tool logistics.shipment_status: enable`, `applied 2 change\(s\)`)
	wantNoChanges(t, r, admin, example)
}

// The registry file parser and its checks never panic, whatever the
// input, and refuse what they cannot read.
func FuzzRegistryFile(f *testing.F) {
	f.Add([]byte(baseRegistryFile + contractEntryYAML + "    approved: [sha256:00]\n"))
	f.Add([]byte("version: 1\nrollout:\n  - {server: a, audience_class: b.c, stage: canary, percent: -3, effects: [x], reason: r}\n"))
	f.Add([]byte("version: 1\nservers:\n  - {id: a, owner: t/user:x, url: 'http://[::1]:80/', trust: partner}\n"))
	empty := &state{servers: map[string]*registryv1.Server{}, classes: map[string]*registryv1.AudienceClass{},
		tenants: map[string]*registryv1.Policy{}, tools: map[string]*registryv1.Tool{}, stages: map[string]*registryv1.RolloutStage{}}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := parseRegistryFile(b)
		if err != nil {
			return
		}
		for _, prune := range []bool{false, true} {
			if d, err := check(file, empty, prune); err == nil {
				makePlan(d, empty, prune)
			}
		}
	})
}
