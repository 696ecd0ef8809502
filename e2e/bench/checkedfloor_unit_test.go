package bench

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/canonical"
)

// TestCheckedFloorRefusesWhatSection4Refuses: the checked floor's catalog
// checks refuse each kind of tool DESIGN §4 refuses, and digest an accepted
// tool as the RFC 8785 form of the tool as sent (unknown fields kept).
func TestCheckedFloorRefusesWhatSection4Refuses(t *testing.T) {
	deep := `{"type":"object"}`
	for range floorMaxSchemaDepth + 1 {
		deep = `{"type":"object","properties":{"a":` + deep + `}}`
	}
	for name, tool := range map[string]string{
		"name rules":       `{"name":"a b","inputSchema":{"type":"object"}}`,
		"no input schema":  `{"name":"a"}`,
		"schema not obj":   `{"name":"a","inputSchema":[1]}`,
		"unknown dialect":  `{"name":"a","inputSchema":{"$schema":"https://example.invalid/s","type":"object"}}`,
		"nested dialect":   `{"name":"a","inputSchema":{"type":"object","properties":{"x":{"$schema":"draft-04"}}}}`,
		"network ref":      `{"name":"a","inputSchema":{"type":"object","properties":{"x":{"$ref":"https://example.invalid/x"}}}}`,
		"unresolved ref":   `{"name":"a","inputSchema":{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}}`,
		"dynamic ref":      `{"name":"a","inputSchema":{"type":"object","$dynamicRef":"https://example.invalid/x"}}`,
		"too deep":         `{"name":"a","inputSchema":` + deep + `}`,
		"icon scheme":      `{"name":"a","inputSchema":{"type":"object"},"icons":[{"src":"http://example.invalid/i.png"}]}`,
		"bad output":       `{"name":"a","inputSchema":{"type":"object"},"outputSchema":{"$ref":"http://x"}}`,
		"too large":        `{"name":"a","inputSchema":{"type":"object"},"description":"` + strings.Repeat("x", floorMaxToolBytes) + `"}`,
		"not canonicalize": `{"name":"a","inputSchema":{"type":"object"},"x":1e999}`,
	} {
		if _, err := checkTool(json.RawMessage(tool), map[string]bool{}); !errors.Is(err, errFloorRefuse) {
			t.Errorf("%s: accepted (%v)", name, err)
		}
	}
	seen := map[string]bool{}
	ok := json.RawMessage(`{"name":"a","inputSchema":{"type":"object","properties":{"x":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}},"zUnknown":{"b":1,"a":2}}`)
	ft, err := checkTool(ok, seen)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := canonical.Digest(ok)
	if ft.digest != want || ft.name != "a" || string(ft.raw) != string(ok) {
		t.Fatalf("accepted as %+v, want digest %s", ft, want)
	}
	if _, err := checkTool(ok, seen); !errors.Is(err, errFloorRefuse) {
		t.Fatalf("a repeated name was accepted: %v", err)
	}
}

// TestCheckedFloorCommitsOnlyWhatItStartedFrom: the checked floor's group
// commit refuses a scan whose tenant's policy epoch moved since it started
// (I1), commits one that found the registry as it read it, and pins its
// identity on first contact.
func TestCheckedFloorCommitsOnlyWhatItStartedFrom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newRulesFloorStore(ctx, t, checkedForm)
	if err := s.register(ctx, []string{"http://127.0.0.1:1/a"}); err != nil {
		t.Fatal(err)
	}
	server := floorServer(0)
	scan := func() *floorCommit {
		t.Helper()
		if err := s.enqueue(ctx, server); err != nil {
			t.Fatal(err)
		}
		jobs, err := s.take(ctx, 1)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("take: %v %v", jobs, err)
		}
		c := &floorCommit{server: server, job: jobs[0].id, names: []string{"a"}, digests: []string{"sha256:d"},
			inputs: []string{"sha256:i"}, raws: [][]byte{[]byte(`{"name":"a"}`)}, revision: "r1",
			pageDigests: []string{"sha256:p"}, pageRoot: "sha256:root", identity: "sha256:id"}
		var expected int64
		c.run, expected, c.scan, err = s.startChecked(ctx, server)
		if err != nil || expected != 0 {
			t.Fatalf("start: %d %v", expected, err)
		}
		c.trust = c.scan.trustDigest(server, c.identity)
		return c
	}
	moved := scan()
	if _, err := s.pool.Exec(ctx, `UPDATE floor_tenants SET policy_epoch = policy_epoch + 1`); err != nil {
		t.Fatal(err)
	}
	if err := s.commit(ctx, moved); err == nil || !strings.Contains(err.Error(), "found the registry as they read it") {
		t.Fatalf("a scan whose epoch moved committed: %v", err)
	}
	var pin string
	if err := s.pool.QueryRow(ctx, `SELECT identity_pin FROM floor_servers`).Scan(&pin); err != nil || pin != "" {
		t.Fatalf("pin %q after the refused commit (%v)", pin, err)
	}
	// The refused scan's job is still running: end it as a retry would.
	if _, err := s.pool.Exec(ctx, `UPDATE floor_jobs SET state = 'retryable'`); err != nil {
		t.Fatal(err)
	}
	if err := s.commit(ctx, scan()); err != nil {
		t.Fatal(err)
	}
	var snapshots int
	if err := s.pool.QueryRow(ctx, `SELECT identity_pin, (SELECT count(*) FROM floor_snapshots WHERE policy_epoch = 8)
FROM floor_servers`).Scan(&pin, &snapshots); err != nil || pin != "sha256:id" || snapshots != 1 {
		t.Fatalf("pin %q, %d snapshots at the new epoch (%v)", pin, snapshots, err)
	}
}
