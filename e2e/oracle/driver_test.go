package oracle_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/internal/fixturetest"
)

func drive(t *testing.T, s *fixture.Server, tr mcp.Transport, version string) []fixture.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	events, err := fixturetest.Walk(ctx, s, tr, version)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

func start(t *testing.T, script fixture.Script) *fixture.Server { return fixturetest.Start(t, script) }

func inMemory(t *testing.T, s *fixture.Server) mcp.Transport { return fixturetest.InMemory(t, s) }

func overHTTP(t *testing.T, s *fixture.Server) mcp.Transport { return fixturetest.OverHTTP(t, s, nil) }
