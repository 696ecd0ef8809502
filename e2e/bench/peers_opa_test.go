package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/admission/admissiontest"
)

// envPeerChild makes TestPeerAdmissionServer serve (in a child process of
// TestPeerOPA, so that its CPU time is its own).
const envPeerChild = "TOOLCRIB_PEER_CHILD"

// peerAdmissionLine prefixes the child's one line: the JSON of
// [peerAdmission].
const peerAdmissionLine = "peer-admission: "

// peerAdmission is what the child tells its parent.
type peerAdmission struct {
	Addr string `json:"addr"`
	// Tokens by user: alice (granted) and bob (no grants), of the world's
	// tenant.
	Tokens map[string]string `json:"tokens"`
}

// TestPeerAdmissionServer is not a test: run by TestPeerOPA as a child
// process, it serves the admission benchmark's service (admissiontest,
// Redis as L2) until its stdin closes.
func TestPeerAdmissionServer(t *testing.T) {
	if os.Getenv(envPeerChild) != "admission" {
		t.Skip("the child process of TestPeerOPA")
	}
	a := admissiontest.Start(t, admissiontest.Options{Redis: true})
	b, err := json.Marshal(peerAdmission{Addr: a.Addr, Tokens: map[string]string{
		"alice": a.Auth.User(t, admissiontest.User, admissiontest.Tenant), "bob": a.Auth.User(t, "bob", admissiontest.Tenant)}})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(peerAdmissionLine + string(b))
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// peerCase is one row of the equivalence table: one request, as a Check
// and as OPA's input, and the reason both must give.
type peerCase struct {
	name, who, tool, digest, class, args string
	generation                           int64
	want                                 string
}

// peerCases reach every seed-004 rule the benchmark's world can show
// through the API, and the two Check adds (confirmation, the schema).
func peerCases() []peerCase {
	const args = `{"shipment_id":"S-1042"}`
	ok := peerCase{who: "alice", tool: admissiontest.StatusTool, digest: admissiontest.StatusDigest, args: args,
		generation: admissiontest.Generation}
	with := func(name, want string, edit func(*peerCase)) peerCase {
		c := ok
		c.name, c.want = name, want
		edit(&c)
		return c
	}
	return []peerCase{
		with("allow", "ALLOW", func(*peerCase) {}),
		with("allow, the tenant's class named", "ALLOW", func(c *peerCase) { c.class = admissiontest.Class }),
		with("another tenant's class", "FORBIDDEN", func(c *peerCase) { c.class = "demo-b.readers" }),
		with("descriptor digest missing", "INVALID_INPUT", func(c *peerCase) { c.digest = "" }),
		with("generation 0", "INVALID_INPUT", func(c *peerCase) { c.generation = 0 }),
		with("arguments a JSON string", "INVALID_INPUT", func(c *peerCase) { c.args = `"S-1042"` }),
		with("a tool the generation lacks", "NOT_FOUND", func(c *peerCase) { c.tool = "logistics.no_such_tool" }),
		with("descriptor not approved", "UNREVIEWED", func(c *peerCase) {
			c.tool, c.digest = admissiontest.DraftTool, admissiontest.DraftDigest
		}),
		with("an older descriptor", "STALE_SCHEMA", func(c *peerCase) { c.digest = "sha256:" + strings.Repeat("6", 64) }),
		with("an actor with no grant (not visible)", "NOT_FOUND", func(c *peerCase) { c.who = "bob" }),
		with("confirmation always, autonomous", "CONFIRMATION_REQUIRED", func(c *peerCase) {
			c.tool, c.digest = admissiontest.CancelTool, admissiontest.CancelDigest
		}),
		with("arguments: wrong type", "ARGUMENTS_INVALID", func(c *peerCase) { c.args = `{"shipment_id":42}` }),
		with("arguments: required missing", "ARGUMENTS_INVALID", func(c *peerCase) { c.args = `{}` }),
	}
}

func (c peerCase) check() *admissionv1.CheckRequest {
	return &admissionv1.CheckRequest{ToolId: c.tool, Generation: c.generation, DescriptorDigest: c.digest,
		PolicyEpoch: admissiontest.Epoch, Arguments: []byte(c.args), Mode: admissionv1.Mode_MODE_AUTONOMOUS, AudienceClass: c.class}
}

// opaInput is the case as OPA's input document: the actor as the verified
// token names it (OPA is given it; it verifies no token), the request's
// fields, the arguments as JSON and the decision time.
func (c peerCase) opaInput(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"input": map[string]any{
		"actor":   map[string]any{"sub": c.who, "tenant": admissiontest.Tenant},
		"tool_id": c.tool, "descriptor_digest": c.digest, "generation": c.generation, "policy_epoch": admissiontest.Epoch,
		"mode": "autonomous", "audience_class": c.class, "arguments": json.RawMessage(c.args),
		"now_ms": time.Now().UnixMilli()}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// opaData is the benchmark world's facts for the Rego policy: what
// admission reads from the registry and discovery (admissiontest).
func opaData(t *testing.T) []byte {
	t.Helper()
	tool := func(digest, approved, scope string, always bool, id string) map[string]any {
		return map[string]any{"enabled": true, "class": admissiontest.Class, "descriptor_digest": digest, "approved_digest": approved, "scope": scope,
			"confirmation_always": always, "input_schema": json.RawMessage(admissiontest.InputSchema(id))}
	}
	b, err := json.Marshal(map[string]any{
		"tenants": map[string]any{admissiontest.Tenant: map[string]any{
			"policy_valid_until_ms": time.Now().Add(24 * time.Hour).UnixMilli(),
			"grants": map[string]any{admissiontest.User: map[string]any{"classes": []string{admissiontest.Class},
				"scopes": []string{"shipment:read", "shipment:write"}}}}},
		"tools": map[string]any{
			admissiontest.StatusTool: tool(admissiontest.StatusDigest, admissiontest.StatusDigest, "shipment:read", false, admissiontest.StatusTool),
			admissiontest.CancelTool: tool(admissiontest.CancelDigest, admissiontest.CancelDigest, "shipment:write", true, admissiontest.CancelTool),
			admissiontest.DraftTool:  tool(admissiontest.DraftDigest, "", "", false, admissiontest.DraftTool),
		}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const opaDecisionPath = "/v1/data/toolcrib/admission/decision"

// TestPeerOPA is `make bench-peers`' OPA line: OPA (`opa run --server`,
// the program named by TOOLCRIB_PEER_OPA) deciding seed 004's rules plus
// json.match_schema of the same arguments (testdata/peer-opa.rego) beside
// the admission benchmark's service (a child process), the same client (16
// calls in flight), the arms interleaved; each process's CPU time is read
// from /proc. The equivalence table runs first, and it refuses to measure
// when the two disagree on any case. Never timed, never fails on speed.
func TestPeerOPA(t *testing.T) {
	opa := os.Getenv(envPeerOPA)
	if opa == "" {
		t.Skip("set " + envPeerOPA + " to an opa binary (make bench-peers)")
	}
	// The admission service, in a child process.
	child := exec.Command(os.Args[0], "-test.run=^TestPeerAdmissionServer$", "-test.timeout=30m")
	child.Env = append(os.Environ(), envPeerChild+"=admission")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = io.Discard
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close() // the child stops and drops its database
		done := make(chan struct{})
		go func() { _ = child.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = child.Process.Kill()
			<-done
		}
	})
	var pa peerAdmission
	if err := json.Unmarshal([]byte(childLine(t, stdout, peerAdmissionLine, 2*time.Minute)), &pa); err != nil {
		t.Fatal(err)
	}
	clients := map[string]admissionv1.AdmissionServiceClient{}
	for who, tok := range pa.Tokens {
		clients[who] = admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, pa.Addr, tok))
	}

	// OPA, with the policy and the world's facts.
	dir := t.TempDir()
	rego, err := os.ReadFile("testdata/peer-opa.rego")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"policy.rego": rego, "data.json": opaData(t)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := freePort(t)
	srv := startProcess(t, opa, []string{"run", "--server", "--addr", addr, "--skip-version-check", "--log-level", "error",
		filepath.Join(dir, "policy.rego"), filepath.Join(dir, "data.json")})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: peerInFlight, MaxConnsPerHost: peerInFlight}}
	t.Cleanup(hc.CloseIdleConnections)
	base := "http://" + addr
	waitFor(t, time.Minute, "opa", func() error {
		resp, err := hc.Get(base + "/health")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health: %s", resp.Status)
		}
		return nil
	})
	decideOPA := func(ctx context.Context, body []byte) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+opaDecisionPath, bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var out struct {
			Result struct {
				Allow  bool   `json:"allow"`
				Reason string `json:"reason"`
			} `json:"result"`
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("opa: %s", resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return "", fmt.Errorf("opa: %w", err)
		}
		if out.Result.Allow != (out.Result.Reason == "ALLOW") {
			return "", fmt.Errorf("opa: allow %v with reason %q", out.Result.Allow, out.Result.Reason)
		}
		return out.Result.Reason, nil
	}
	decideCheck := func(ctx context.Context, c peerCase, req *admissionv1.CheckRequest) (string, error) {
		resp, err := clients[c.who].Check(ctx, req)
		if err != nil {
			return "", err
		}
		return strings.TrimPrefix(resp.GetReason().String(), "DECISION_REASON_"), nil
	}

	// The equivalence table, before anything is measured.
	ctx := context.Background()
	cases := peerCases()
	var differ []string
	fmt.Printf("peer: equivalence (%d cases; Check and OPA must agree before anything is measured)\n", len(cases))
	for _, c := range cases {
		got, err := decideCheck(ctx, c, c.check())
		if err != nil {
			t.Fatalf("%s: Check: %v", c.name, err)
		}
		gotOPA, err := decideOPA(ctx, c.opaInput(t))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		mark := "agree"
		if got != gotOPA || got != c.want {
			mark = "DIFFER"
			differ = append(differ, c.name)
		}
		fmt.Printf("  %-36s check=%-22s opa=%-22s want=%-22s %s\n", c.name, got, gotOPA, c.want, mark)
	}
	if len(differ) > 0 {
		t.Fatalf("Check and OPA disagree on %d cases (%s): nothing measured", len(differ), strings.Join(differ, "; "))
	}

	// The arms: the allow case, cached by Check from its first answer.
	allow := cases[0]
	checkReq, opaBody := allow.check(), allow.opaInput(t)
	checkCall := func(ctx context.Context) error {
		r, err := decideCheck(ctx, allow, checkReq)
		if err == nil && r != "ALLOW" {
			err = fmt.Errorf("check: %s", r)
		}
		return err
	}
	opaCall := func(ctx context.Context) error {
		r, err := decideOPA(ctx, opaBody)
		if err == nil && r != "ALLOW" {
			err = fmt.Errorf("opa: %s", r)
		}
		return err
	}
	var warm, checkArm, opaArm peerArm
	warm.slice(t, child.Process.Pid, peerInFlight, peerSlice, checkCall)
	warm.slice(t, srv.Process.Pid, peerInFlight, peerSlice, opaCall)
	for range peerSlices {
		checkArm.slice(t, child.Process.Pid, peerInFlight, peerSlice, checkCall)
		opaArm.slice(t, srv.Process.Pid, peerInFlight, peerSlice, opaCall)
	}
	fmt.Printf("peer: engine=opa opa_qps=%.0f check_qps=%.0f ratio=%.2f opa_cpu_ms_per_1k=%.0f check_cpu_ms_per_1k=%.0f\n",
		opaArm.qps(), checkArm.qps(), checkArm.qps()/opaArm.qps(), opaArm.cpuMsPer1k(), checkArm.cpuMsPer1k())
	fmt.Printf("  (%d in flight, %d interleaved slices of %s per arm, %d and %d decisions; ratio = check_qps / opa_qps; CPU = the serving process's user+system time; %s)\n",
		peerInFlight, peerSlices, peerSlice, opaArm.calls, checkArm.calls, stamp())
}
