package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/principal"

	"github.com/toolcrib/toolcrib/services/admission/admissiontest"
)

// acli runs `toolcrib` against the admission service a with token.
func acli(t *testing.T, a *admissiontest.Service, token string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	full := append([]string{"--admission", a.Addr, "--token", token, "--timeout", "10s"}, args...)
	err := run(ctx, full, &out, &errOut)
	return out.String(), err
}

func mustACLI(t *testing.T, a *admissiontest.Service, token string, args ...string) string {
	t.Helper()
	out, err := acli(t, a, token, args...)
	if err != nil {
		t.Fatalf("toolcrib %s: %s", strings.Join(args, " "), describe(err))
	}
	return out
}

// `toolcrib check` against a real admission service (real tokens, real
// cache, validator and receipt writer; the registry and discovery behind it
// in memory): each reason printed with its detail and the receipt binding
// generation, digest and epoch; --json is the response as protojson; another
// tenant's token gets NOT_FOUND for the same tool id and digest; bad flags
// fail before any call.
func TestCheckThroughTheCLI(t *testing.T) {
	a := admissiontest.Start(t, admissiontest.Options{Redis: true})
	alice := a.Auth.User(t, admissiontest.User, admissiontest.Tenant)
	gen, dig := "7", admissiontest.StatusDigest

	out := mustACLI(t, a, alice, "check", "--generation", gen, "--digest", dig, "--epoch", "5",
		"--args", `{"shipment_id":"S1"}`, "--run-id", "run-1", admissiontest.StatusTool)
	wantLines(t, out, `(?m)^decision\s+allow$`, `(?m)^reason\s+ALLOW$`, `(?m)^detail\s+allowed$`,
		`(?m)^valid until\s+\d{4}-\d\d-\d\dT`, `(?m)^current generation\s+7$`, `(?m)^current policy epoch\s+5$`,
		`(?m)^receipt\s+[0-9a-f-]{36}$`, `(?m)^  principal\s+alice@demo-a$`, `(?m)^  tool\s+logistics\.shipment_status$`,
		`(?m)^  server\s+logistics$`, `(?m)^  audience class\s+demo-a\.readers$`, `(?m)^  generation\s+7$`,
		`(?m)^  descriptor digest\s+`+dig+`$`, `(?m)^  policy epoch\s+5$`, `(?m)^  argument digest\s+sha256:[0-9a-f]{64}$`,
		`(?m)^  effect\s+read-only$`, `(?m)^  mode\s+autonomous$`, `(?m)^  run\s+run-1$`)

	// The arguments are validated against the input schema on every call.
	out = mustACLI(t, a, alice, "check", "--generation", gen, "--digest", dig, "--args", `{"shipment_id":7}`, admissiontest.StatusTool)
	wantLines(t, out, `(?m)^decision\s+deny$`, `(?m)^reason\s+ARGUMENTS_INVALID$`, `(?m)^detail\s+.*/shipment_id`)

	// A destructive tool with confirmation always: autonomous is denied,
	// user-confirmed is allowed.
	cancelArgs := []string{"--generation", gen, "--digest", admissiontest.CancelDigest, "--args", `{"shipment_id":"S1"}`}
	out = mustACLI(t, a, alice, append(append([]string{"check"}, cancelArgs...), admissiontest.CancelTool)...)
	wantLines(t, out, `(?m)^reason\s+CONFIRMATION_REQUIRED$`, `(?m)^  effect\s+destructive$`)
	// User-confirmed needs a confirmer's token beside alice's: refused
	// before any call without one, FORBIDDEN with a tenant user's.
	_, err := acli(t, a, alice, append(append([]string{"check", "--mode", "user-confirmed"}, cancelArgs...), admissiontest.CancelTool)...)
	if err == nil || !strings.Contains(err.Error(), "--mode user-confirmed needs --confirmer-token") {
		t.Fatalf("user-confirmed without a confirmer token: %v", err)
	}
	out = mustACLI(t, a, alice, append(append([]string{"check", "--mode", "user-confirmed", "--confirmer-token", alice}, cancelArgs...), admissiontest.CancelTool)...)
	wantLines(t, out, `(?m)^reason\s+FORBIDDEN$`, `(?m)^detail\s+a confirmer must assert`)
	out = mustACLI(t, a, alice, append(append([]string{"check", "--mode", "user-confirmed", "--confirmer-token", a.Auth.Confirmer(t)}, cancelArgs...), admissiontest.CancelTool)...)
	wantLines(t, out, `(?m)^reason\s+ALLOW$`, `(?m)^  mode\s+user-confirmed$`, `(?m)^  confirmed by\s+test-confirmer$`,
		`(?m)^  confirmed at\s+\d{4}-\d\d-\d\dT`, `(?m)^  shown digest\s+-$`)

	out = mustACLI(t, a, alice, "check", "--generation", gen, "--digest", admissiontest.DraftDigest, admissiontest.DraftTool)
	wantLines(t, out, `(?m)^reason\s+UNREVIEWED$`)
	out = mustACLI(t, a, alice, "check", "--generation", "6", "--digest", dig, "--args", `{"shipment_id":"S1"}`, admissiontest.StatusTool)
	wantLines(t, out, `(?m)^decision\s+deny$`)

	// --json: the response itself.
	out = mustACLI(t, a, alice, "--json", "check", "--generation", gen, "--digest", dig, "--args", `{"shipment_id":"S1"}`, admissiontest.StatusTool)
	var got struct {
		Decision, Reason, Detail string
		Receipt                  struct{ ReceiptID, DescriptorDigest, Generation string }
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(out, `"receiptId"`, `"receiptid"`)), &got); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if got.Decision != "DECISION_ALLOW" || got.Reason != "DECISION_REASON_ALLOW" || got.Receipt.ReceiptID == "" ||
		got.Receipt.DescriptorDigest != dig || got.Receipt.Generation != "7" {
		t.Fatalf("--json: %+v\n%s", got, out)
	}

	// Another tenant's principal, same tool id and digest: NOT_FOUND.
	bob := a.Auth.User(t, "bob", "demo-b")
	out = mustACLI(t, a, bob, "check", "--generation", gen, "--digest", dig, "--args", `{"shipment_id":"S1"}`, admissiontest.StatusTool)
	wantLines(t, out, `(?m)^reason\s+NOT_FOUND$`, `(?m)^  principal\s+bob@demo-b$`, `(?m)^  generation\s+-$`)

	// No token: the service refuses.
	if _, err := acli(t, a, "", "check", "--generation", gen, "--digest", dig, admissiontest.StatusTool); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a token: %v", err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--mode", "sometimes", admissiontest.StatusTool}, `--mode "sometimes": not one of autonomous, user-confirmed`},
		{[]string{"check", "--args", "{nope", admissiontest.StatusTool}, "--args: not a JSON document"},
		{[]string{"check"}, "expected <tool-id>, got 0 argument(s)"},
	} {
		if _, err := acli(t, a, alice, bad.args...); err == nil || err.Error() != bad.want {
			t.Errorf("toolcrib %s: %v, want %q", strings.Join(bad.args, " "), err, bad.want)
		}
	}
}

// `toolcrib visible` against a real admission service: both views of every
// callable tool (the unreviewed one left out), the visible-set digest,
// search, effect filter, --max with truncation, --json, and the address
// from TOOLCRIB_ADMISSION_ADDR.
func TestVisibleThroughTheCLI(t *testing.T) {
	a := admissiontest.Start(t, admissiontest.Options{})
	alice := a.Auth.User(t, admissiontest.User, admissiontest.Tenant)

	out := mustACLI(t, a, alice, "visible")
	wantLines(t, out, `(?m)^policy epoch\s+5$`, `(?m)^visible set\s+2 tools, sha256:[0-9a-f]{64}$`, `(?m)^shown\s+2$`,
		`(?m)^Model view$`, `(?m)^cancel_shipment\s+Cancel a shipment that has not left the warehouse\.\s+\{"type":"object"`,
		`(?m)^shipment_status\s+Query the current status of a shipment\.\s+\{"type":"object"`,
		`(?m)^Runtime view$`,
		`(?m)^cancel_shipment\s+logistics\.cancel_shipment\s+logistics\s+demo-a\.readers\s+7\s+sha256:b{64}\s+destructive\s+(SNAPSHOT_PROVEN|ELIGIBLE)\s+yes$`,
		`(?m)^shipment_status\s+logistics\.shipment_status\s+logistics\s+demo-a\.readers\s+7\s+sha256:a{64}\s+read-only\s+(SNAPSHOT_PROVEN|ELIGIBLE)\s+no$`)
	if strings.Contains(out, "draft_label") {
		t.Fatalf("an unreviewed tool is listed:\n%s", out)
	}

	out = mustACLI(t, a, alice, "visible", "--query", "cancel a shipment")
	wantLines(t, out, `(?m)^shown\s+\d$`)
	if i, j := strings.Index(out, "cancel_shipment"), strings.Index(out, "shipment_status"); i < 0 || (j >= 0 && j < i) {
		t.Fatalf("the search did not rank cancel_shipment first:\n%s", out)
	}
	out = mustACLI(t, a, alice, "visible", "--effect", "read-only")
	wantLines(t, out, `(?m)^shown\s+1$`, `(?m)^visible set\s+2 tools`)
	if strings.Contains(out, "cancel_shipment") {
		t.Fatalf("--effect read-only listed a destructive tool:\n%s", out)
	}
	out = mustACLI(t, a, alice, "visible", "--max", "1")
	wantLines(t, out, `(?m)^shown\s+1 \(truncated by --max or --max-bytes\)$`)

	t.Setenv("TOOLCRIB_ADMISSION_ADDR", a.Addr)
	var buf, errBuf bytes.Buffer
	if err := run(context.Background(), []string{"--token", alice, "--json", "visible"}, &buf, &errBuf); err != nil {
		t.Fatal(describe(err))
	}
	var got struct {
		Tools []struct {
			Model   struct{ Name string }
			Runtime struct{ ToolID string }
		}
		VisibleCount int
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(buf.String(), `"toolId"`, `"toolid"`)), &got); err != nil {
		t.Fatalf("--json: %v\n%s", err, buf.String())
	}
	if got.VisibleCount != 2 || len(got.Tools) != 2 || got.Tools[0].Model.Name != "cancel_shipment" || got.Tools[0].Runtime.ToolID != admissiontest.CancelTool {
		t.Fatalf("--json: %+v\n%s", got, buf.String())
	}
	if _, err := acli(t, a, alice, "visible", "--effect", "harmless"); err == nil || !strings.Contains(err.Error(), `--effect "harmless": not one of destructive, read-only, reservation, write`) {
		t.Fatalf("bad --effect: %v", err)
	}
	// --run-id reaches the service: a well-formed one lists as before (no
	// server is in canary here), a malformed one is refused by it.
	out = mustACLI(t, a, alice, "visible", "--run-id", "run-1")
	wantLines(t, out, `(?m)^shown\s+2$`)
	if _, err := acli(t, a, alice, "visible", "--run-id", "run 1"); err == nil || !strings.Contains(err.Error(), "run_id") {
		t.Fatalf("malformed --run-id: %v", err)
	}
}

// recordingAdmission answers Check with an empty response and records the
// metadata each call carried.
type recordingAdmission struct {
	admissionv1.UnimplementedAdmissionServiceServer
	mu    sync.Mutex
	calls []metadata.MD
}

func (r *recordingAdmission) Check(ctx context.Context, _ *admissionv1.CheckRequest) (*admissionv1.CheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, md)
	return &admissionv1.CheckResponse{}, nil
}

// `check --mode user-confirmed` asserts a confirmation only with a
// confirmer's token (--confirmer-token, else TOOLCRIB_CONFIRMER_TOKEN), sent
// under the confirmer metadata key beside the user's own token; without one
// it is a usage error and nothing is sent. Other modes send no confirmer.
func TestCheckUserConfirmedNeedsAConfirmerToken(t *testing.T) {
	rec := &recordingAdmission{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	admissionv1.RegisterAdmissionServiceServer(srv, rec)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	check := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		full := append([]string{"--admission", l.Addr().String(), "--token", "user-tok", "check", "--generation", "1", "--digest", "sha256:ab"}, args...)
		err := run(t.Context(), append(full, "inventory.ship"), &out, &errOut)
		return out.String(), err
	}
	last := func() metadata.MD {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.calls[len(rec.calls)-1]
	}

	t.Setenv(confirmerTokenEnv, "")
	if _, err := check("--mode", "user-confirmed"); !errors.Is(err, errNoConfirmer) || exitCode(err) != 1 ||
		!strings.Contains(describe(err), "needs --confirmer-token (env TOOLCRIB_CONFIRMER_TOKEN)") {
		t.Fatalf("user-confirmed without a confirmer: %v", err)
	}
	if len(rec.calls) != 0 {
		t.Fatalf("a Check was sent without a confirmer: %d call(s)", len(rec.calls))
	}

	if _, err := check("--mode", "user-confirmed", "--confirmer-token", "gw-tok"); err != nil {
		t.Fatal(describe(err))
	}
	if md := last(); !slices.Equal(md.Get(principal.ConfirmerMetadataKey), []string{"Bearer gw-tok"}) ||
		!slices.Equal(md.Get("authorization"), []string{"Bearer user-tok"}) {
		t.Fatalf("user-confirmed with --confirmer-token sent %v", md)
	}

	t.Setenv(confirmerTokenEnv, "env-tok")
	if _, err := check("--mode", "user-confirmed"); err != nil {
		t.Fatal(describe(err))
	}
	if md := last(); !slices.Equal(md.Get(principal.ConfirmerMetadataKey), []string{"Bearer env-tok"}) {
		t.Fatalf("user-confirmed with %s sent %v", confirmerTokenEnv, md)
	}
	if _, err := check("--mode", "autonomous"); err != nil {
		t.Fatal(describe(err))
	}
	if md := last(); len(md.Get(principal.ConfirmerMetadataKey)) != 0 {
		t.Fatalf("an autonomous check sent a confirmer: %v", md)
	}
}
