package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// TestRolloutGuardCommands: an incident reported to a real discovery rolls
// generation 2 back; `rollout actions` lists the action held, as text and
// JSON; `rollout resume` ends the hold (and says lease issuance stays
// frozen); a second resume finds nothing.
func TestRolloutGuardCommands(t *testing.T) {
	d := startDiscovery(t, func(c *discovery.Config) { c.AdmissionAddr, c.GuardInterval = "", 100*time.Millisecond })
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

	svc := discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, d.addr, d.auth.Service(t)))
	if _, err := svc.ReportIncident(t.Context(), &discoveryv1.ReportIncidentRequest{EventId: "cli-test:1", ServerId: "inventory",
		AudienceClass: "tenant-a.readers", Kind: discoveryv1.IncidentKind_INCIDENT_KIND_LEASE_AFTER_REVOKE, Generation: 2}); err != nil {
		t.Fatal(err)
	}
	var out string
	deadline := time.Now().Add(20 * time.Second)
	for out = cli("rollout", "actions"); !strings.Contains(out, "UNAUTHORIZED_EVENT"); out = cli("rollout", "actions") {
		if time.Now().After(deadline) {
			t.Fatalf("no guard action within 20s:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"ID", "EVIDENCE", "inventory", "tenant-a.readers", "ROLLBACK", "2 -> 1", "1 incident(s): cli-test:1", "held"} {
		if !strings.Contains(out, want) {
			t.Fatalf("rollout actions lacks %q:\n%s", want, out)
		}
	}
	var listed struct {
		Actions []struct {
			ActionID       string   `json:"actionId"`
			Rule           string   `json:"rule"`
			FromGeneration string   `json:"fromGeneration"`
			IncidentIDs    []string `json:"incidentIds"`
		} `json:"actions"`
	}
	if err := json.Unmarshal([]byte(cli("--json", "rollout", "actions", "--held", "--server", "inventory")), &listed); err != nil ||
		len(listed.Actions) != 1 || listed.Actions[0].Rule != "GUARD_RULE_UNAUTHORIZED_EVENT" || listed.Actions[0].FromGeneration != "2" ||
		len(listed.Actions[0].IncidentIDs) != 1 {
		t.Fatalf("rollout actions --json: %+v %v", listed, err)
	}
	if _, errOut, code := d.run(t.Context(), "rollout", "resume", "inventory", "tenant-a.readers"); code == 0 || !strings.Contains(errOut, "--reason") {
		t.Fatalf("resume without --reason: exit %d %s", code, errOut)
	}
	res := cli("rollout", "resume", "--reason", "reviewed", "inventory", "tenant-a.readers")
	for _, want := range []string{"resumed:", "action 1", "UNAUTHORIZED_EVENT ROLLBACK, 2 -> 1", "lease freeze --resume inventory"} {
		if !strings.Contains(res, want) {
			t.Fatalf("rollout resume lacks %q:\n%s", want, res)
		}
	}
	if out := cli("rollout", "actions", "--held"); strings.Contains(out, "UNAUTHORIZED_EVENT") {
		t.Fatalf("still held after the resume:\n%s", out)
	}
	if out := cli("rollout", "actions"); !strings.Contains(out, "reviewed") {
		t.Fatalf("the resume is not shown:\n%s", out)
	}
	if out := cli("rollout", "resume", "--reason", "again", "inventory", "tenant-a.readers"); !strings.Contains(out, "nothing") {
		t.Fatalf("second resume:\n%s", out)
	}
}
