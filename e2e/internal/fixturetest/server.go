package fixturetest

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/fixture"
)

// Start starts a fixture replaying script, closed when the test ends.
func Start(t testing.TB, script fixture.Script) *fixture.Server {
	t.Helper()
	s, err := fixture.New(script, nil)
	if err != nil {
		t.Fatalf("fixture.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// InMemory connects a new in-memory session of s and returns its client end.
func InMemory(t testing.TB, s *fixture.Server) mcp.Transport {
	t.Helper()
	tr, err := s.ConnectInMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// OverHTTP serves s over streamable HTTP (stateless or not; nil picks as
// [fixture.HTTPOptions] does) and returns a client transport to it that
// does not retry.
func OverHTTP(t testing.TB, s *fixture.Server, stateless *bool) mcp.Transport {
	t.Helper()
	ep, err := s.StartHTTP(fixture.HTTPOptions{Stateless: stateless})
	if err != nil {
		t.Fatal(err)
	}
	return &mcp.StreamableClientTransport{Endpoint: ep.URL, MaxRetries: -1}
}
