package scenario_test

import (
	"context"
	"testing"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/internal/fixturetest"
	"github.com/toolcrib/toolcrib/e2e/oracle"
	"github.com/toolcrib/toolcrib/e2e/scenario"
)

// BenchmarkRound is the fixture and oracle side of one randomized round
// over the in-memory transport (the walker stands in for the crawler).
func BenchmarkRound(b *testing.B) {
	var seed uint64
	for b.Loop() {
		seed++
		sc := scenario.Generate(seed)
		s, err := fixture.New(sc.Script, nil)
		if err != nil {
			b.Fatal(err)
		}
		tr, err := s.ConnectInMemory(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		events, err := fixturetest.Walk(context.Background(), s, tr, sc.Script.ProtocolVersion)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = oracle.Expect(events, sc.Config)
		_ = s.Close()
	}
}

func BenchmarkGenerate(b *testing.B) {
	var seed uint64
	for b.Loop() {
		seed++
		scenario.Generate(seed)
	}
}
