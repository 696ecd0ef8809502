package oracle_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/internal/walker"
)

func drive(t *testing.T, s *fixture.Server, tr mcp.Transport, version string) []fixture.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	events, err := walker.Walk(ctx, s, tr, version)
	if err != nil {
		t.Fatal(err)
	}
	return events
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
