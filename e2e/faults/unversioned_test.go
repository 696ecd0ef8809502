package faults_test

import (
	"os"
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/faultreport"
	"github.com/toolcrib/toolcrib/services/discovery"
)

// TestUnversionedSourceIsObservationOnly (I3): a server that gives no
// catalog revision, registered with revision source NONE, is read over
// stdio (the fixture binary as a child of discovery) into
// UNVERSIONED_OBSERVATION generations: usable for showing candidates, never
// ELIGIBLE, so never a basis for an autonomous call with side effects. A
// server that does send revisions but is registered NONE is unversioned
// too (the registry never vouched for its revisions). A server registered
// SERVER_PROVIDED that sends none never activates at all
// (INCOMPLETE REVISION_MISSING, retried).
func TestUnversionedSourceIsObservationOnly(t *testing.T) {
	t.Parallel()
	bin := stdioFixture(t)
	e := startDiscovery(t, envOptions{configure: func(c *discovery.Config) { c.MaxAttempts = 2 }})

	for _, tc := range []struct {
		name    string
		server  string
		script  fixture.Script
		changed fixture.Tool
	}{
		{"a server without revisions", "plain", fixture.Script{PageSize: 2, Tools: tools("plain", 5)}, fixture.NewTool("plain_9", "Added.")},
		{"a versioned server registered NONE", "vouched-for-by-nobody", fixture.Script{Versioned: true, PageSize: 2, Tools: tools("rev", 3)}, fixture.NewTool("rev_9", "Added.")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, logPath, err := fixture.StdioCommand(bin, t.TempDir(), tc.script)
			if err != nil {
				t.Fatal(err)
			}
			e.register(tc.server, overStdio(args), noRevision, "")
			first := e.wait(e.scan(tc.server, class), nil)
			want(t, first, unversioned, noReason)
			events := readStdioLog(t, logPath)
			agrees(t, first, judge(t, scanLogs(events)[0], noRevision))
			observationOnly(t, e, tc.server, 1, tc.script.Tools)

			// The stdio fixture is a new process per scan: change its script.
			next := tc.script
			next.Tools = append(append([]fixture.Tool(nil), tc.script.Tools...), tc.changed)
			if err := fixture.WriteScript(strings.TrimPrefix(args[1], "-script="), next); err != nil { // args: binary -script=<path> -log=<path>
				t.Fatal(err)
			}
			second := e.wait(e.scan(tc.server, class), nil)
			want(t, second, unversioned, noReason)
			observationOnly(t, e, tc.server, 2, next.Tools)
		})
	}

	t.Run("a server registered SERVER_PROVIDED that sends no revision", func(t *testing.T) {
		s := startFixture(t, fixture.Script{PageSize: 2, Tools: tools("liar", 3)})
		e.register("liar", overHTTP(serveHTTP(t, s, fixture.HTTPOptions{}).URL), serverProvided, "")
		id := e.scan("liar", class)
		for n := int32(1); n <= 2; n++ {
			want(t, e.wait(id, attempt(n)), incomplete, discoveryv1.RunReason_RUN_REASON_REVISION_MISSING)
		}
		if e.active("liar", class) != nil {
			t.Fatal("a source that must carry revisions and carries none activated a catalog")
		}
		agrees(t, e.runs(id)[0], judge(t, scanLogs(s.Log().Events())[0], serverProvided))
	})
}

// observationOnly checks the active generation of an unversioned server:
// UNVERSIONED_OBSERVATION everywhere it is visible (pointer, snapshot,
// change stream), without a source revision, with the tools as listed; it
// records unversioned_side_effect_eligible.
func observationOnly(t *testing.T, e *env, server string, generation int64, tools []fixture.Tool) {
	t.Helper()
	resp := e.active(server, class)
	if resp == nil {
		t.Fatal("the observation was not committed")
	}
	p, snap := resp.GetPointer(), resp.GetSnapshot()
	ptrs, err := discovery.WaitPointers(ctxT(t), e.admin, 0, []discovery.PointerKey{{ServerID: server, AudienceClass: class}},
		func(p *discoveryv1.ActivePointer) bool { return p.GetGeneration() == generation })
	if err != nil {
		t.Fatal(err)
	}
	watched := ptrs[discovery.PointerKey{ServerID: server, AudienceClass: class}]
	eligibleSomewhere := p.GetSnapshotState() == eligible || snap.GetState() == eligible || watched.GetSnapshotState() == eligible
	n := int64(0)
	if eligibleSomewhere {
		n = 1
	}
	faultreport.Add(t, faultreport.UnversionedSideEffectEligible, n)
	if eligibleSomewhere || p.GetSnapshotState() != unversioned || snap.GetState() != unversioned || watched.GetSnapshotState() != unversioned {
		t.Fatalf("an unversioned source's generation %d: pointer %v, snapshot %v, watched %v; want UNVERSIONED_OBSERVATION everywhere",
			p.GetGeneration(), p.GetSnapshotState(), snap.GetState(), watched.GetSnapshotState())
	}
	if p.GetGeneration() != generation || snap.GetSourceRevision() != "" {
		t.Fatalf("generation %d with source revision %q, want generation %d without one", p.GetGeneration(), snap.GetSourceRevision(), generation)
	}
	var got, want []string
	for _, tool := range snap.GetTools() {
		got = append(got, string(tool.GetRaw()))
	}
	for _, tool := range tools {
		want = append(want, string(tool.JSON()))
	}
	if len(got) != len(want) {
		t.Fatalf("observed %d tools, the server lists %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("tool %d observed as %s, listed as %s", i, got[i], want[i])
		}
	}
}

// readStdioLog reads the mutation log a stdio fixture wrote.
func readStdioLog(t *testing.T, path string) []fixture.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := fixture.ReadLog(f)
	if err != nil {
		t.Fatal(err)
	}
	return events
}
