package faultreport

import (
	"strings"
	"testing"
)

func TestSummaryAddsRecordsAndRefusesMissingCounters(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DirEnv, dir)
	Add(t, Rounds, 60)
	Add(t, Rounds, 40)
	Add(t, Agree, 100)
	s, err := Summarize(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Totals[Rounds] != 100 || s.Totals[Agree] != 100 {
		t.Fatalf("totals %v", s.Totals)
	}
	if _, err := s.Line(); err == nil || !strings.Contains(err.Error(), "network_ref_fetched") {
		t.Fatalf("a line was printed with counters no test recorded: %v", err)
	}
	for _, c := range []string{UnversionedSideEffectEligible, PartialActivated, CrossAudienceShared, UnknownDialectAccepted, NetworkRefFetched, CASNotLinearizable} {
		Add(t, c, 0)
	}
	s, _ = Summarize(dir)
	if _, err := s.Line(); err == nil {
		t.Fatal("cas_linearizable printed without a linearizability check")
	}
	Add(t, CASChecks, 3)
	s, _ = Summarize(dir)
	line, err := s.Line()
	if err != nil {
		t.Fatal(err)
	}
	want := "faults: rounds=100 agree=100 unversioned_side_effect_eligible=0 partial_activated=0 cross_audience_shared=0 unknown_dialect_accepted=0 network_ref_fetched=0 cas_linearizable=true"
	if line != want {
		t.Fatalf("line\n%s\nwant\n%s", line, want)
	}
	Add(t, CASNotLinearizable, 1)
	s, _ = Summarize(dir)
	if line, _ := s.Line(); !strings.HasSuffix(line, "cas_linearizable=false") {
		t.Fatalf("a failed check still prints true: %s", line)
	}
}
