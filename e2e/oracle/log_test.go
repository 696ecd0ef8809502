package oracle_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/oracle"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// cleanLog is the log of an undisturbed 3-page scan (requests 1–3, re-check
// 4), with sequence numbers spaced by 10 so events can be slipped in.
func cleanLog(t *testing.T, versioned bool) []fixture.Event {
	t.Helper()
	s := start(t, fixture.Script{Versioned: versioned, PageSize: 3, Tools: named(seven...)})
	events := drive(t, s, inMemory(t, s), "")
	for i := range events {
		events[i].Seq *= 10
		if events[i].Kind == fixture.EventRequest {
			events[i].Session = "crawler"
		}
	}
	return events
}

func without(events []fixture.Event, drop func(fixture.Event) bool) []fixture.Event {
	return slices.DeleteFunc(slices.Clone(events), drop)
}

// withCursor returns events with request n's cursor replaced.
func withCursor(events []fixture.Event, n int, cursor string) []fixture.Event {
	ev := slices.Clone(events)
	for i := range ev {
		if ev[i].Request == n && ev[i].Kind == fixture.EventRequest {
			ev[i].Cursor = cursor
		}
	}
	return ev
}

// slipIn adds e just before the answer to request n.
func slipIn(t *testing.T, events []fixture.Event, n int, e fixture.Event) []fixture.Event {
	t.Helper()
	for i, x := range events {
		if x.Request == n && x.Kind == fixture.EventPage {
			e.Seq = x.Seq - 5
			return slices.Insert(slices.Clone(events), i, e)
		}
	}
	t.Fatalf("no page for request %d", n)
	return nil
}

func TestLogsTheReferenceCrawlCannotJudge(t *testing.T) {
	versionedLog := cleanLog(t, true)
	cfg := oracle.Config{RevisionSource: serverProvided}
	cases := []struct {
		name   string
		events []fixture.Event
		cfg    oracle.Config
		want   error
	}{
		{"no request at all", versionedLog[:1], cfg, oracle.ErrUnfinished},
		{"the re-check is missing on a versioned server", without(versionedLog, func(e fixture.Event) bool { return e.Request == 4 }), cfg, oracle.ErrUnfinished},
		{"page 2 was never answered (a crawler killed while the server blocked)",
			without(versionedLog, func(e fixture.Event) bool { return e.Request == 2 && e.Kind == fixture.EventPage }), cfg, oracle.ErrUnfinished},
		{"page 2 was asked with another cursor than page 1 returned",
			withCursor(versionedLog, 2, "made-up"), cfg, oracle.ErrDeviation},
		{"the re-check carried a cursor", withCursor(versionedLog, 4, "x"), cfg, oracle.ErrDeviation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := oracle.Expect(tc.events, tc.cfg); !errors.Is(err, tc.want) {
				t.Fatalf("Expect = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := oracle.Expect(versionedLog, oracle.Config{}); err == nil {
		t.Fatal("Expect accepted an unspecified revision source")
	}
}

func TestEditedLogs(t *testing.T) {
	versionedLog, plainLog := cleanLog(t, true), cleanLog(t, false)
	note := func(session string, code int64) fixture.Event {
		return fixture.Event{Kind: fixture.EventNotification, Session: session, Code: code}
	}
	cases := []struct {
		name   string
		events []fixture.Event
		source registryv1.RevisionSource
		want   string
	}{
		{"unversioned, the re-check skipped: an observation of the 3 pages",
			without(plainLog, func(e fixture.Event) bool { return e.Request == 4 }), noRevision, "DISCOVERY_STATE_UNVERSIONED_OBSERVATION"},
		{"list_changed to the crawler's session before page 2",
			slipIn(t, versionedLog, 2, note("crawler", 0)), serverProvided, "DISCOVERY_STATE_INCOMPLETE/RUN_REASON_LIST_CHANGED"},
		{"list_changed to a session without an id before page 2 may be the crawler's",
			slipIn(t, versionedLog, 2, note("", 0)), serverProvided, "DISCOVERY_STATE_INCOMPLETE/RUN_REASON_LIST_CHANGED"},
		{"list_changed to another session is not the crawler's business",
			slipIn(t, versionedLog, 2, note("someone-else", 0)), serverProvided, "DISCOVERY_STATE_SNAPSHOT_PROVEN"},
		{"a list_changed the server failed to send never arrived",
			slipIn(t, versionedLog, 2, note("crawler", -1)), serverProvided, "DISCOVERY_STATE_SNAPSHOT_PROVEN"},
		{"a crash while page 2 was in flight drops it", crashedAtPage2(versionedLog), serverProvided,
			"DISCOVERY_STATE_INCOMPLETE/RUN_REASON_TRANSPORT_ERROR"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := oracle.Expect(tc.events, oracle.Config{RevisionSource: tc.source})
			if err != nil {
				t.Fatalf("Expect: %v", err)
			}
			if got.String() != tc.want {
				t.Fatalf("outcome %s (%s), want %s", got, got.Detail, tc.want)
			}
		})
	}
}

// crashedAtPage2 is a log in which request 2 got no answer and the server
// then dropped its connections (an out-of-band crash).
func crashedAtPage2(events []fixture.Event) []fixture.Event {
	ev := without(events, func(e fixture.Event) bool {
		return e.Request >= 3 || (e.Request == 2 && e.Kind == fixture.EventPage)
	})
	return append(ev, fixture.Event{Seq: ev[len(ev)-1].Seq + 1, Kind: fixture.EventCrash})
}

func TestOutcomeHelpers(t *testing.T) {
	versionedLog := cleanLog(t, true)
	got, err := oracle.Expect(versionedLog, oracle.Config{RevisionSource: serverProvided})
	if err != nil {
		t.Fatal(err)
	}
	if got.CommittedState().String() != "DISCOVERY_STATE_ELIGIBLE" || got.Revision != "r-1" ||
		got.Pages != 3 || got.Requests != 4 || got.DecidedAt != 4 || len(got.ToolDigests()) != 7 || !got.Whole {
		t.Fatalf("outcome %+v", got)
	}
	plain, err := oracle.Expect(versionedLog, oracle.Config{RevisionSource: noRevision})
	if err != nil {
		t.Fatal(err)
	}
	if plain.CommittedState().String() != "DISCOVERY_STATE_UNVERSIONED_OBSERVATION" || plain.Revision != "" || plain.EligibleForAutonomousSideEffects() {
		t.Fatalf("unversioned outcome %+v", plain)
	}
	if plain.Reason != discoveryv1.RunReason_RUN_REASON_UNSPECIFIED {
		t.Fatalf("reason %s", plain.Reason)
	}
}
