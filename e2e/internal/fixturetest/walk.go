package fixturetest

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/fixture"
)

// MaxRequests bounds one walk.
const MaxRequests = 200

// Walk connects to tr at version ("" for the SDK's default), walks the
// fixture s from page 1 following `nextCursor`, then asks for the closing
// re-check, and returns the log of the scan (s.Log().Since a mark taken
// after connecting). What each page said is read from the fixture's own log:
// go-sdk's typed client hides an empty-string `nextCursor` and refuses
// malformed tools. It goes on after faults the oracle must then ignore, and
// stops after an error or a crash, at a cursor it has sent before, after
// the re-check, or when the SDK answers from its own cache without asking
// the server.
func Walk(ctx context.Context, s *fixture.Server, tr mcp.Transport, version string) ([]fixture.Event, error) {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fixturetest-walker", Version: "1"}, nil).
		Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return nil, fmt.Errorf("fixturetest: connect: %w", err)
	}
	defer cs.Close()
	mark := s.Log().Mark()
	modern := cs.InitializeResult().ProtocolVersion >= fixture.Version20260728
	seen := map[string]bool{"": modern}
	cursor, recheck := "", false
	for range MaxRequests {
		before := s.Requests()
		_, _ = cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		n := s.Requests()
		if n == before {
			break
		}
		answer, ok := answerTo(s.Log().Since(mark), n)
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
	return s.Log().Since(mark), nil
}

func answerTo(events []fixture.Event, request int) (fixture.Event, bool) {
	for _, e := range events {
		if e.Request == request && (e.Kind == fixture.EventPage || e.Kind == fixture.EventError || e.Kind == fixture.EventCrash) {
			return e, true
		}
	}
	return fixture.Event{}, false
}
