package scenario_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/internal/fixturetest"
	"github.com/toolcrib/toolcrib/e2e/oracle"
	"github.com/toolcrib/toolcrib/e2e/scenario"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

func TestSameSeedSameScenario(t *testing.T) {
	for seed := range uint64(200) {
		a, _ := json.Marshal(scenario.Generate(seed))
		b, _ := json.Marshal(scenario.Generate(seed))
		if string(a) != string(b) {
			t.Fatalf("seed %d generated two different scenarios", seed)
		}
	}
	a, _ := json.Marshal(scenario.Generate(1).Script)
	b, _ := json.Marshal(scenario.Generate(2).Script)
	if string(a) == string(b) {
		t.Fatal("seeds 1 and 2 generated the same script")
	}
}

func TestScenariosAreReplayableAndNeverEndAVersionedListEarly(t *testing.T) {
	http := 0
	const n = 5000
	for seed := range uint64(n) {
		sc := scenario.Generate(seed)
		if err := sc.Script.Validate(); err != nil {
			t.Fatalf("%s: %v", sc, err)
		}
		switch sc.Config.RevisionSource {
		case registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, registryv1.RevisionSource_REVISION_SOURCE_NONE:
		default:
			t.Fatalf("%s: revision source %v", sc, sc.Config.RevisionSource)
		}
		lim := sc.Config.Limits
		if lim.MaxPages < 1 || lim.MaxTools < 1 || lim.MaxBytes < 1 || lim.MaxSchemaBytes < 1 || lim.MaxToolBytes < 1 || lim.MaxSchemaDepth < 1 {
			t.Fatalf("%s: a cap left at 0 (no cap) would need the crawler to have none either: %+v", sc, lim)
		}
		modern := sc.Script.ProtocolVersion >= fixture.Version20260728
		for _, st := range sc.Script.Steps {
			early := st.Cursor == fixture.CursorEnd ||
				(!modern && st.Cursor == fixture.CursorEmpty) ||
				(!modern && st.Cursor == fixture.CursorRepeat && st.Request == 1) ||
				(!modern && st.Cursor == fixture.CursorCycle && st.CycleTo == 1)
			if early {
				t.Fatalf("%s: step %+v ends the list early", sc, st)
			}
		}
		if sc.Transport == scenario.TransportHTTP {
			http++
		}
	}
	if share := float64(http) / n; share < 0.08 || share > 0.18 {
		t.Fatalf("%.2f of scenarios over HTTP, want about 1/%d", share, scenario.HTTPShare)
	}
}

// run replays sc in a fresh fixture with the test walker and judges it.
func run(t *testing.T, sc scenario.Scenario) ([]fixture.Event, oracle.Outcome, error) {
	t.Helper()
	s, err := fixture.New(sc.Script, nil)
	if err != nil {
		t.Fatalf("%s: %v", sc, err)
	}
	defer s.Close()
	var tr mcp.Transport
	if sc.Transport == scenario.TransportHTTP {
		ep, err := s.StartHTTP(fixture.HTTPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tr = &mcp.StreamableClientTransport{Endpoint: ep.URL, MaxRetries: -1}
	} else if tr, err = s.ConnectInMemory(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events, err := fixturetest.Walk(ctx, s, tr, sc.Script.ProtocolVersion)
	if err != nil {
		t.Fatalf("%s: %v", sc, err)
	}
	out, err := oracle.Expect(events, sc.Config)
	return events, out, err
}

// comparable strips what differs between two replays: times and
// generated session ids.
func comparable(events []fixture.Event) string {
	out := make([]fixture.Event, len(events))
	for i, e := range events {
		e.Time, e.Session = time.Time{}, ""
		out[i] = e
	}
	raw, _ := json.Marshal(out)
	return string(raw)
}

func TestReplayIsDeterministic(t *testing.T) {
	for seed := range uint64(120) {
		sc := scenario.Generate(seed)
		ev1, out1, err1 := run(t, sc)
		ev2, out2, err2 := run(t, sc)
		if comparable(ev1) != comparable(ev2) {
			t.Fatalf("%s: two replays logged different events", sc)
		}
		if fmt.Sprint(out1, err1) != fmt.Sprint(out2, err2) || !slices.Equal(toolNames(out1), toolNames(out2)) {
			t.Fatalf("%s: two replays judged %s (%v) and %s (%v)", sc, out1, err1, out2, err2)
		}
	}
}

func toolNames(o oracle.Outcome) []string {
	var names []string
	for _, t := range o.Tools {
		names = append(names, t.Name+"="+t.DescriptorDigest)
	}
	return names
}

func TestScenariosReachEveryOutcome(t *testing.T) {
	rounds := 1200
	if testing.Short() {
		rounds = 400
	}
	seen := map[string]int{}
	unfinished := 0
	for seed := range uint64(rounds) {
		sc := scenario.Generate(seed)
		_, out, err := run(t, sc)
		switch {
		case errors.Is(err, oracle.ErrUnfinished):
			// Only the SDK client's own cache may skip the re-check.
			if sc.Script.Cache == nil || sc.Script.Cache.TTLMs == 0 {
				t.Fatalf("%s: %v", sc, err)
			}
			unfinished++
			continue
		case err != nil:
			t.Fatalf("%s: %v", sc, err)
		}
		seen[out.String()]++
		if out.Activates() && out.Reason != discoveryv1.RunReason_RUN_REASON_UNSPECIFIED {
			t.Fatalf("%s: %s activates with a reason", sc, out)
		}
		if out.State.String() == "DISCOVERY_STATE_SNAPSHOT_PROVEN" && !out.Whole {
			t.Fatalf("%s: a proven catalog that is not whole: the generator let a server lie", sc)
		}
	}
	want := []string{
		"DISCOVERY_STATE_SNAPSHOT_PROVEN",
		"DISCOVERY_STATE_UNVERSIONED_OBSERVATION",
	}
	for _, r := range []discoveryv1.RunReason{
		discoveryv1.RunReason_RUN_REASON_LIST_CHANGED,
		discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH,
		discoveryv1.RunReason_RUN_REASON_REVISION_MISSING,
		discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR,
		discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE,
		discoveryv1.RunReason_RUN_REASON_PAGE_CAP,
		discoveryv1.RunReason_RUN_REASON_TOOL_CAP,
		discoveryv1.RunReason_RUN_REASON_BYTE_CAP,
		discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR,
	} {
		want = append(want, "DISCOVERY_STATE_INCOMPLETE/"+r.String())
	}
	want = append(want, "DISCOVERY_STATE_QUARANTINED/"+discoveryv1.RunReason_RUN_REASON_DUPLICATE_TOOL_NAME.String())
	for _, w := range want {
		if seen[w] == 0 {
			t.Errorf("no scenario in %d ended %s", rounds, w)
		}
	}
	// Each content fault is rare; together they must show up.
	quarantine := 0
	for k := range seen {
		if strings.HasPrefix(k, "DISCOVERY_STATE_QUARANTINED/") {
			quarantine++
		}
	}
	if quarantine < 5 {
		t.Errorf("only %d quarantine reasons reached in %d rounds", quarantine, rounds)
	}
	if p := seen["DISCOVERY_STATE_SNAPSHOT_PROVEN"]; p < rounds/5 || p > rounds*4/5 {
		t.Errorf("%d of %d scenarios proven: the mix is lopsided", p, rounds)
	}
	t.Logf("%d rounds, %d unfinished (client cache): %v", rounds, unfinished, seen)
}
