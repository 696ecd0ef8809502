package oracle_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/fixture"
)

// drive walks a fixture the way the reference crawl does, reading what
// each page said from the fixture's own log (the SDK's typed client hides
// an empty-string nextCursor and refuses malformed tools). It goes on
// after faults the oracle must then ignore, and stops at an error, a
// cursor seen before, or after the closing re-check. It returns the log of
// the scan.
func drive(t *testing.T, s *fixture.Server, tr mcp.Transport, version string) []fixture.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "oracle-test", Version: "1"}, nil).
		Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	mark := s.Log().Mark()
	modern := cs.InitializeResult().ProtocolVersion >= fixture.Version20260728
	seen := map[string]bool{"": modern}
	cursor, recheck := "", false
	for range 60 {
		before := s.Requests()
		_, _ = cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if s.Requests() == before {
			break // answered without asking the server (the SDK's cache)
		}
		answer, ok := answerTo(s.Log().Events(), s.Requests())
		if !ok || answer.Kind != fixture.EventPage || recheck {
			break
		}
		if !answer.HasNext || (!modern && answer.NextCursor == "") {
			cursor, recheck = "", true
			continue
		}
		if seen[answer.NextCursor] {
			break
		}
		seen[answer.NextCursor] = true
		cursor = answer.NextCursor
	}
	return s.Log().Since(mark)
}

func answerTo(events []fixture.Event, request int) (fixture.Event, bool) {
	for _, e := range events {
		if e.Request == request && (e.Kind == fixture.EventPage || e.Kind == fixture.EventError || e.Kind == fixture.EventCrash) {
			return e, true
		}
	}
	return fixture.Event{}, false
}

func start(t *testing.T, script fixture.Script) *fixture.Server {
	t.Helper()
	s, err := fixture.New(script, nil)
	if err != nil {
		t.Fatalf("fixture.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func inMemory(t *testing.T, s *fixture.Server) mcp.Transport {
	t.Helper()
	tr, err := s.ConnectInMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func overHTTP(t *testing.T, s *fixture.Server) mcp.Transport {
	t.Helper()
	ep, err := s.StartHTTP(fixture.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &mcp.StreamableClientTransport{Endpoint: ep.URL, MaxRetries: -1}
}
