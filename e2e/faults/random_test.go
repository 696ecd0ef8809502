package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/oracle"
	"github.com/toolcrib/toolcrib/e2e/scenario"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/faultreport"
	"github.com/toolcrib/toolcrib/services/discovery/candidate"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/validate"
)

// Environment of the randomized test.
const (
	// RoundsEnv sets the number of rounds (default: ciRounds).
	RoundsEnv = "TOOLCRIB_FAULT_ROUNDS"
	// SeedEnv replays one seed (the round count is then 1).
	SeedEnv = "TOOLCRIB_FAULT_SEED"
	// SeedBaseEnv sets the first seed of a run (default: from the clock,
	// logged), so a run can be repeated whole.
	SeedBaseEnv = "TOOLCRIB_FAULT_SEED_BASE"
)

// ciRounds is the share `make test` runs (about 15 s either way); `make
// faults` runs 100,000. Under the race detector a round costs about four
// times as much.
func ciRounds() int {
	if raceEnabled {
		return 3_000
	}
	return 10_000
}

const replayTest = "TestRandomizedCrawlAgreesWithOracle"

// TestRandomizedCrawlAgreesWithOracle is the model-based test of DESIGN §9:
// rounds of random pagination and notification interleavings (package
// scenario: page sizes, tools added, removed and changed between and
// during pages, revisions present or absent, notifications at random
// points, cursor, revision, transport and content faults), each crawled by
// the discovery crawler and validated as a discovery worker does
// (candidate.Observe) over in-memory transports and, in one round of
// eight, streamable HTTP; and each compared with the independent oracle
// (package oracle), which judges the fixture's own mutation log. The end
// state, the reason and, when the round activates, the exact tool set in
// page order (names → descriptor digests) must agree in every round.
//
// Every round also checks, without the oracle, that nothing unversioned
// came out proven (eligible for autonomous side effects), that a proven
// catalog is exactly one whole catalog state of the server, and that no
// catalog with an unknown `$schema` dialect came out usable.
//
// A disagreement prints the seed and a command replaying it.
func TestRandomizedCrawlAgreesWithOracle(t *testing.T) {
	rounds, base := ciRounds(), uint64(time.Now().UnixNano())
	if testing.Short() {
		rounds /= 10
	}
	if v := os.Getenv(RoundsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", RoundsEnv, v)
		}
		rounds = n
	}
	if v := os.Getenv(SeedBaseEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a seed", SeedBaseEnv, v)
		}
		base = n
	}
	if v := os.Getenv(SeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a seed", SeedEnv, v)
		}
		base, rounds = n, 1
	}
	// Rounds allocate a lot of short-lived JSON; collecting less often
	// makes them about twice as fast.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	t.Logf("%d rounds from seed %d (repeat the run with %s=%d %s=%d)", rounds, base, SeedBaseEnv, base, RoundsEnv, rounds)

	var (
		next      atomic.Uint64
		tally     tally
		mu        sync.Mutex
		reported  int
		stopEarly atomic.Bool
	)
	const maxReports = 10
	workers := runtime.GOMAXPROCS(0)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for !stopEarly.Load() {
				i := next.Add(1) - 1
				if i >= uint64(rounds) {
					return
				}
				seed := base + i
				r := playRound(seed, rounds == 1)
				tally.add(r)
				if r.disagreement == "" {
					continue
				}
				mu.Lock()
				reported++
				if reported <= maxReports {
					t.Errorf("seed %d: the crawler and the oracle disagree: %s\n  scenario: %s\n  replay: %s=%d go test -run '^%s$' -v ./e2e/faults/",
						seed, r.disagreement, r.scenario, SeedEnv, seed, replayTest)
				}
				if reported == maxReports {
					stopEarly.Store(true)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)

	played := tally.rounds.Load()
	faultreport.Add(t, faultreport.Rounds, played)
	faultreport.Add(t, faultreport.Agree, tally.agree.Load())
	faultreport.Add(t, faultreport.UnversionedSideEffectEligible, tally.unversionedEligible.Load())
	faultreport.Add(t, faultreport.PartialActivated, tally.partial.Load())
	faultreport.Add(t, faultreport.UnknownDialectAccepted, tally.unknownDialect.Load())
	t.Logf("%d rounds (%d over HTTP) in %v on %d workers: %d agree; outcomes: %s; torn unversioned observations (allowed, I3): %d; unordered notification-and-drop rounds answered with the other allowed reason: %d",
		played, tally.http.Load(), took.Round(time.Millisecond), workers, tally.agree.Load(), tally.outcomes(), tally.tornUnversioned.Load(), tally.unordered.Load())
	for what, n := range map[string]int64{
		"unversioned rounds came out proven (eligible for autonomous side effects)": tally.unversionedEligible.Load(),
		"proven catalogs were not exactly one whole catalog state":                  tally.partial.Load(),
		"usable catalogs carried an unknown $schema dialect":                        tally.unknownDialect.Load(),
	} {
		if n > 0 {
			t.Errorf("%d %s", n, what)
		}
	}
	if stopEarly.Load() {
		t.Fatalf("stopped after %d disagreements", reported)
	}
	if rounds == 1 && lastTrace != "" {
		t.Logf("trace of the round:\n%s", lastTrace)
	}
}

// lastTrace is the trace of a replayed round (one round only).
var lastTrace string

// round is the verdict of one round.
type round struct {
	scenario     string
	http         bool
	outcome      string // the agreed outcome, e.g. INCOMPLETE/LIST_CHANGED
	disagreement string // "" when crawler and oracle agree
	// Findings of the independent checks.
	unversionedEligible, partial, unknownDialect, tornUnversioned bool
	// unordered: the crawler gave the oracle's other allowed reason for an
	// interleaving the log does not order (oracle.Outcome.AlsoAllowed).
	unordered bool
}

// tally sums rounds across workers.
type tally struct {
	rounds, agree, http                                                      atomic.Int64
	unversionedEligible, partial, unknownDialect, tornUnversioned, unordered atomic.Int64
	mu                                                                       sync.Mutex
	byOutcome                                                                map[string]int
}

func (t *tally) add(r round) {
	t.rounds.Add(1)
	count := func(c *atomic.Int64, b bool) {
		if b {
			c.Add(1)
		}
	}
	count(&t.agree, r.disagreement == "")
	count(&t.http, r.http)
	count(&t.unversionedEligible, r.unversionedEligible)
	count(&t.partial, r.partial)
	count(&t.unknownDialect, r.unknownDialect)
	count(&t.tornUnversioned, r.tornUnversioned)
	count(&t.unordered, r.unordered)
	if r.outcome != "" {
		t.mu.Lock()
		if t.byOutcome == nil {
			t.byOutcome = map[string]int{}
		}
		t.byOutcome[r.outcome]++
		t.mu.Unlock()
	}
}

func (t *tally) outcomes() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.byOutcome))
	for k := range t.byOutcome {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, t.byOutcome[k])
	}
	return strings.TrimSpace(b.String())
}

// playRound replays the scenario of seed: a fresh fixture, crawled and
// validated by discovery's candidate.Observe, judged by the oracle. With
// trace it keeps the fixture's log and the crawler's pages in lastTrace.
func playRound(seed uint64, trace bool) round {
	sc := scenario.Generate(seed)
	r := round{scenario: sc.String(), http: sc.Transport == scenario.TransportHTTP}
	s, err := fixture.New(sc.Script, nil)
	if err != nil {
		r.disagreement = "the fixture refused the scenario: " + err.Error()
		return r
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	mark := s.Log().Mark()
	var target crawl.Target
	if r.http {
		ep, err := s.StartHTTP(fixture.HTTPOptions{})
		if err != nil {
			r.disagreement = "starting HTTP: " + err.Error()
			return r
		}
		target = crawl.Target{URL: ep.URL}
	} else {
		tr, err := s.ConnectInMemory(ctx)
		if err != nil {
			r.disagreement = "connecting in memory: " + err.Error()
			return r
		}
		target = crawl.Target{Transport: tr, Identity: "sha256:in-memory-fixture"}
	}
	lim := sc.Config.Limits
	versioned := sc.Config.RevisionSource == registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED
	got := candidate.Observe(ctx, target,
		crawl.Options{Versioned: versioned, MaxPages: lim.MaxPages, MaxTools: lim.MaxTools, MaxBytes: lim.MaxBytes},
		validate.Limits{MaxToolBytes: lim.MaxToolBytes, MaxSchemaBytes: lim.MaxSchemaBytes, MaxSchemaDepth: lim.MaxSchemaDepth})
	events := s.Log().Since(mark)

	if trace {
		lastTrace = traceOf(sc, events, got)
	}

	// The independent checks first: they hold whatever the oracle says.
	proven := got.State == catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN
	r.unversionedEligible = proven && (!versioned || !sc.Script.Versioned)
	if proven {
		r.partial = !wholeState(events, got)
	}
	if got.State == catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION {
		r.tornUnversioned = !wholeState(events, got)
	}
	if got.Committable() {
		for _, t := range got.Tools {
			if unknownDialect(t.Crawled.Raw) {
				r.unknownDialect = true
			}
		}
	}

	cfg := sc.Config
	cfg.ConcurrentStreams = r.http
	want, err := oracle.Expect(events, cfg)
	gotOutcome := fmt.Sprintf("%s/%s", strings.TrimPrefix(got.State.String(), "DISCOVERY_STATE_"), strings.TrimPrefix(got.Reason.String(), "RUN_REASON_"))
	if err != nil {
		r.disagreement = fmt.Sprintf("crawler %s (%s); the oracle cannot judge the log: %v", gotOutcome, got.Detail, err)
		return r
	}
	wantOutcome := fmt.Sprintf("%s/%s", strings.TrimPrefix(want.State.String(), "DISCOVERY_STATE_"), strings.TrimPrefix(want.Reason.String(), "RUN_REASON_"))
	r.unordered = got.Reason != want.Reason && slices.Contains(want.AlsoAllowed, got.Reason)
	if got.State != want.State || got.Reason != want.Reason && !r.unordered {
		r.disagreement = fmt.Sprintf("crawler %s (%s), oracle %s (%s)", gotOutcome, got.Detail, wantOutcome, want.Detail)
		return r
	}
	if want.Activates() {
		gotTools := make([]string, len(got.Tools))
		for i, t := range got.Tools {
			gotTools[i] = t.Derived.Name + "=" + t.Crawled.Digest
		}
		wantTools := make([]string, len(want.Tools))
		for i, t := range want.Tools {
			wantTools[i] = t.Name + "=" + t.DescriptorDigest
		}
		if !slices.Equal(gotTools, wantTools) {
			r.disagreement = fmt.Sprintf("both %s, but the crawler activates %v and the oracle %v", gotOutcome, gotTools, wantTools)
			return r
		}
	}
	r.outcome = gotOutcome
	return r
}

// wholeState reports whether the candidate's tools are exactly the whole
// catalog of one state of the fixture: for a versioned crawl the state
// whose revision it proved, for an unversioned one any state.
func wholeState(events []fixture.Event, c *candidate.Candidate) bool {
	raw := make([][]byte, len(c.Crawl.Tools))
	for i, t := range c.Crawl.Tools {
		raw[i] = t.Raw
	}
	for _, e := range events {
		if e.Kind != fixture.EventState || len(e.Tools) != len(raw) {
			continue
		}
		if c.State == catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN && e.Revision != c.Crawl.Revision {
			continue
		}
		same := true
		for i, t := range e.Tools {
			if string(t.JSON()) != string(raw[i]) {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

// allowedDialects are the `$schema` values DESIGN §4 allows, in every
// spelling the validator accepts.
var allowedDialects = map[string]bool{
	"https://json-schema.org/draft/2020-12/schema":  true,
	"https://json-schema.org/draft/2020-12/schema#": true,
	"http://json-schema.org/draft-07/schema":        true,
	"http://json-schema.org/draft-07/schema#":       true,
	"https://json-schema.org/draft-07/schema":       true,
	"https://json-schema.org/draft-07/schema#":      true,
}

// unknownDialect reports whether a tool's schemas name a `$schema` outside
// the allow-list anywhere (no `$schema` means 2020-12).
func unknownDialect(raw []byte) bool {
	var tool map[string]json.RawMessage
	if json.Unmarshal(raw, &tool) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, m := range v {
				if s, ok := m.(string); k == "$schema" && (!ok || !allowedDialects[s]) {
					return true
				}
				if walk(m) {
					return true
				}
			}
		case []any:
			if slices.ContainsFunc(v, walk) {
				return true
			}
		}
		return false
	}
	for _, member := range []string{"inputSchema", "outputSchema"} {
		var v any
		if raw, ok := tool[member]; ok && json.Unmarshal(raw, &v) == nil && walk(v) {
			return true
		}
	}
	return false
}

// traceOf renders a round for a human replaying it.
func traceOf(sc scenario.Scenario, events []fixture.Event, c *candidate.Candidate) string {
	var b strings.Builder
	steps, _ := json.Marshal(sc.Script.Steps)
	fmt.Fprintf(&b, "steps %s\nlimits %+v\nfixture log:\n", steps, sc.Config.Limits)
	for _, e := range events {
		names := make([]string, len(e.Tools))
		for i, t := range e.Tools {
			names[i] = t.Name()
		}
		e.Tools, e.Time = nil, time.Time{}
		raw, _ := json.Marshal(e)
		fmt.Fprintf(&b, "  %s tools=%v\n", raw, names)
	}
	b.WriteString("crawler pages:\n")
	for _, p := range c.Crawl.Pages {
		fmt.Fprintf(&b, "  page %d in=%q out=%q next=%v revision=%q tools=%d bytes=%d\n", p.Index, p.CursorIn, p.CursorOut, p.HasNext, p.Revision, p.ToolCount, p.Bytes)
	}
	fmt.Fprintf(&b, "crawler: %v %v %s (closing revision %q, %d bytes)", c.State, c.Reason, c.Detail, c.Crawl.ClosingRevision, c.Crawl.Bytes)
	return b.String()
}
