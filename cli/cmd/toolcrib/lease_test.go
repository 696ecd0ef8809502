package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
	leasesvc "github.com/toolcrib/toolcrib/services/lease"
	"github.com/toolcrib/toolcrib/services/lease/admissionview"
)

// receiptBook is admission's receipt lookup as the lease service sees it
// (the lease tests prove GetReceipt itself): what the test recorded.
type receiptBook struct {
	mu sync.Mutex
	m  map[string]admissionview.Decision
}

func (b *receiptBook) Receipt(_ context.Context, id string) (admissionview.Decision, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.m[id]
	if !ok {
		return admissionview.Decision{}, admissionview.ErrNotFound
	}
	return d, nil
}

func runCLI(ctx context.Context, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	err := run(ctx, args, &out, &errOut)
	if err != nil {
		fmt.Fprintln(&errOut, "toolcrib:", describe(err))
	}
	return out.String(), errOut.String(), exitCode(err)
}

// TestLeaseCommands drives dev holder-key and lease issue, verify, freeze
// and keys against a real lease service: the issued lease verifies once
// and is refused (exit 1, ALREADY_USED) the second time; a frozen server's
// receipt gets no lease.
func TestLeaseCommands(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx := context.Background()
	auth := servicetest.NewAuth(t)
	digest, _ := lease.ArgumentDigest([]byte(`{"sku":"A-1"}`))
	book := &receiptBook{m: map[string]admissionview.Decision{}}
	for _, id := range []string{"r-1", "r-2"} {
		book.m[id] = admissionview.Decision{Receipt: &admissionv1.Receipt{ReceiptId: id,
			Decision: admissionv1.Decision_DECISION_ALLOW, Reason: catalogv1.DecisionReason_DECISION_REASON_ALLOW,
			TenantId: "acme", Subject: "alice", ToolId: "inv.reserve", ServerId: "inv", AudienceClass: "acme.readers",
			Generation: 2, DescriptorDigest: "sha256:" + strings.Repeat("d", 64), PolicyEpoch: 1, ArgumentDigest: digest,
			DecidedAt: timestamppb.Now()}, ValidUntil: time.Now().Add(time.Minute)}
	}
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: leasesvc.Schema, Sets: leasesvc.Migrations()})
	cfg := leasesvc.Config{Common: auth.Common(t, url, true, nil), KeyFile: filepath.Join(t.TempDir(), "keys.json"),
		KeyRotateEvery: time.Hour, KeyCheckInterval: time.Second, Skew: time.Second, ProofWindow: 10 * time.Second,
		Issuer: "toolcrib-lease", Receipts: book}
	addr := servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Listening = listening
		return leasesvc.Run(ctx, c)
	})
	alice := []string{"--lease", addr, "--token", auth.User(t, "alice", "acme")}
	admin := []string{"--lease", addr, "--token", auth.Admin(t)}

	out, errOut, code := runCLI(ctx, "dev", "holder-key")
	if code != 0 || !strings.Contains(out, "thumbprint: ") {
		t.Fatalf("dev holder-key: %d %s %s", code, out, errOut)
	}
	if fi, err := os.Stat(filepath.Join(devDir, "holder-key.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("holder key file: %v %v", fi, err)
	}
	if _, errOut, code := runCLI(ctx, "dev", "holder-key"); code == 0 {
		t.Fatalf("a second holder-key overwrote the first: %s", errOut)
	}

	out, errOut, code = runCLI(ctx, append(alice, "--json", "lease", "issue", "--receipt", "r-1", "--args", `{"sku":"A-1"}`,
		"--audience", "exec.inv")...)
	if code != 0 {
		t.Fatalf("lease issue: %s", errOut)
	}
	var issued struct {
		Token  string `json:"token"`
		Claims struct {
			LeaseID string `json:"leaseId"`
		} `json:"claims"`
	}
	if err := json.Unmarshal([]byte(out), &issued); err != nil || issued.Token == "" || issued.Claims.LeaseID == "" {
		t.Fatalf("issue --json: %v %s", err, out)
	}
	verify := append(alice, "lease", "verify", "--lease", issued.Token, "--args", `{"sku":"A-1"}`, "--audience", "exec.inv", "--tool", "inv.reserve")
	if out, errOut, code := runCLI(ctx, verify...); code != 0 || !strings.Contains(out, "valid") || !strings.Contains(out, "yes") {
		t.Fatalf("first verify: %d %s %s", code, out, errOut)
	}
	if out, _, code := runCLI(ctx, verify...); code != 1 || !strings.Contains(out, "no: ALREADY_USED") {
		t.Fatalf("second verify: %d %s", code, out)
	}

	if out, errOut, code := runCLI(ctx, append(admin, "lease", "freeze", "--reason", "drill", "inv")...); code != 0 || !strings.Contains(out, "frozen") {
		t.Fatalf("freeze: %d %s %s", code, out, errOut)
	}
	if _, errOut, code := runCLI(ctx, append(alice, "lease", "issue", "--receipt", "r-2", "--args", `{"sku":"A-1"}`, "--audience", "exec.inv")...); code != 1 ||
		!strings.Contains(errOut, "frozen") {
		t.Fatalf("issue while frozen: %d %s", code, errOut)
	}
	if out, _, code := runCLI(ctx, append(admin, "lease", "freeze", "--resume", "inv")...); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("resume: %d %s", code, out)
	}
	if out, errOut, code := runCLI(ctx, append(alice, "lease", "keys")...); code != 0 || !strings.Contains(out, "yes") {
		t.Fatalf("keys: %d %s %s", code, out, errOut)
	}
	if _, errOut, code := runCLI(ctx, append(alice, "lease", "keys", "rotate")...); code != 1 || !strings.Contains(errOut, "PermissionDenied") {
		t.Fatalf("keys rotate as a tenant user: %d %s", code, errOut)
	}
	out, errOut, code = runCLI(ctx, append(admin, "lease", "keys", "rotate", "--reason", "drill")...)
	if code != 0 || !strings.Contains(out, "current key") || !strings.Contains(out, "published until") {
		t.Fatalf("keys rotate: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := runCLI(ctx, append(alice, "--json", "lease", "verify", "--lease", issued.Token, "--args", `{"sku":"A-1"}`,
		"--audience", "exec.inv", "--tool", "inv.reserve")...); code != 1 || !strings.Contains(out, "ALREADY_USED") {
		t.Fatalf("the lease signed before the rotation is checked past its signature: %d %s %s", code, out, errOut)
	}
	if out, _, _ := runCLI(ctx, append(alice, "lease", "keys")...); strings.Count(out, "\n") != 3 {
		t.Fatalf("keys after a rotation: want a header, the new key and the retired one:\n%s", out)
	}
	if _, errOut, code := runCLI(ctx, append(alice, "lease", "freeze", "inv")...); code != 1 || !strings.Contains(errOut, "PermissionDenied") {
		t.Fatalf("freeze as a tenant user: %d %s", code, errOut)
	}
}

// TestDiscoveryRollbackFreezesLeaseIssuance: `toolcrib discovery rollback`
// against a real discovery service, and no other call, freezes lease
// issuance for the server on a real lease service following discovery's
// Watch: Issue is ISSUANCE_FROZEN until `toolcrib lease freeze --resume`.
func TestDiscoveryRollbackFreezesLeaseIssuance(t *testing.T) {
	var regAddr string
	d := startDiscovery(t, func(c *discovery.Config) { regAddr = c.RegistryAddr })
	cat := discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("inv", 3)...)
	mcpSrv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	d.httpServer("inventory", mcpSrv.URL)
	d.reg.PutClass(&registryv1.AudienceClass{Name: "tenant-a.readers", TenantId: "tenant-a",
		Servers: []*registryv1.AudienceServer{{ServerId: "inventory"}}})
	cli := func(args ...string) string {
		t.Helper()
		out, errOut, code := d.run(t.Context(), args...)
		if code != 0 {
			t.Fatalf("toolcrib %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	cli("discovery", "scan", "--audience", "tenant-a.readers", "--wait", "inventory")
	cat.SetTools("r-2", discoverytest.Tools("inv", 4)...)
	cli("discovery", "scan", "--wait", "inventory")

	digest, _ := lease.ArgumentDigest([]byte(`{}`))
	book := &receiptBook{m: map[string]admissionview.Decision{}}
	reg := registryv1.NewRegistryServiceClient(servicetest.Dial(t, regAddr, d.auth.Admin(t)))
	gen := int64(2) // the generation admission decides from: 1 after the rollback
	receipt := func(id string) {
		// Decided at the tenant's current epoch: Issue refuses a decision
		// the policy has moved past.
		pol, err := reg.GetPolicy(t.Context(), &registryv1.GetPolicyRequest{TenantId: "tenant-a"})
		if err != nil {
			t.Fatal(err)
		}
		epoch := pol.GetPolicy().GetPolicyEpoch()
		book.mu.Lock()
		defer book.mu.Unlock()
		book.m[id] = admissionview.Decision{Receipt: &admissionv1.Receipt{ReceiptId: id,
			Decision: admissionv1.Decision_DECISION_ALLOW, Reason: catalogv1.DecisionReason_DECISION_REASON_ALLOW,
			TenantId: "tenant-a", Subject: "alice", ToolId: "inventory.inv_0", ServerId: "inventory", AudienceClass: "tenant-a.readers",
			Generation: gen, DescriptorDigest: "sha256:" + strings.Repeat("d", 64), PolicyEpoch: epoch, ArgumentDigest: digest,
			DecidedAt: timestamppb.Now()}, ValidUntil: time.Now().Add(time.Minute)}
	}
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: leasesvc.Schema, Sets: leasesvc.Migrations()})
	cfg := leasesvc.Config{Common: d.auth.Common(t, url, true, nil), KeyFile: filepath.Join(t.TempDir(), "keys.json"),
		KeyRotateEvery: time.Hour, KeyCheckInterval: time.Second, Skew: time.Second, ProofWindow: 10 * time.Second,
		Issuer: "toolcrib-lease", Receipts: book, RegistryAddr: regAddr, DiscoveryAddr: d.addr, ValidityWindow: 5 * time.Second}
	addr := servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Listening = listening
		return leasesvc.Run(ctx, c)
	})
	t.Chdir(t.TempDir())
	if _, errOut, code := runCLI(t.Context(), "dev", "holder-key"); code != 0 {
		t.Fatal(errOut)
	}
	alice := []string{"--lease", addr, "--token", d.auth.User(t, "alice", "tenant-a")}
	issue := func(id string) (string, int) {
		receipt(id)
		_, errOut, code := runCLI(t.Context(), append(alice, "lease", "issue", "--receipt", id, "--audience", "exec.inv")...)
		return errOut, code
	}
	if errOut, code := issue("before"); code != 0 {
		t.Fatalf("issue before the rollback: %s", errOut)
	}

	cli("discovery", "rollback", "--expected", "2", "--reason", "bad release", "inventory", "tenant-a.readers")
	gen = 1
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		errOut, code := issue(fmt.Sprintf("after-%d", i))
		if code != 0 && (strings.Contains(errOut, "no longer active or compatible") || strings.Contains(errOut, "cannot prove")) {
			// While the replica's pointer view moves (its freeze view next)
			// a decision at the old or new generation is refused
			// STALE_CATALOG or, when the generation's tools cannot be read
			// to tell compatibility, STALE_POLICY: never issued meanwhile.
			code = 0
		} else if code != 0 {
			if !strings.Contains(errOut, "frozen") {
				t.Fatalf("issue after the rollback: %s", errOut)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("issuance still open 10s after the rollback")
		}
		time.Sleep(50 * time.Millisecond)
	}
	admin := []string{"--lease", addr, "--token", d.admin}
	if out, errOut, code := runCLI(t.Context(), append(admin, "lease", "freeze", "--resume", "inventory")...); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("resume: %s %s", out, errOut)
	}
	if errOut, code := issue("resumed"); code != 0 {
		t.Fatalf("issue after the resume: %s", errOut)
	}
}
