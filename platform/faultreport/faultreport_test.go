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

func TestAdmissionLineNeedsEveryCounter(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DirEnv, dir)
	Add(t, AdmissionRounds, 100)
	Add(t, AdmissionAgree, 100)
	s, _ := Summarize(dir)
	if _, err := s.AdmissionLine(); err == nil || !strings.Contains(err.Error(), AdmissionLeaseReuseAccepted) {
		t.Fatalf("an admission line with counters no test recorded: %v", err)
	}
	for _, c := range []string{AdmissionCrossTenantHits, AdmissionAllowAfterWindow, AdmissionAllowAfterRevokeBound, AdmissionLeaseReuseAccepted} {
		Add(t, c, 0)
	}
	Add(t, AdmissionChecksAnswered, 8)
	Add(t, AdmissionReceiptsStored, 8)
	s, _ = Summarize(dir)
	line, err := s.AdmissionLine()
	want := "admission: rounds=100 agree=100 cross_tenant_hits=0 allow_after_window=0 allow_after_revoke_bound=0 lease_reuse_accepted=0 receipt_coverage=1.000"
	if err != nil || line != want || s.AdmissionViolations() {
		t.Fatalf("line %q (%v), violations %v; want %q", line, err, s.AdmissionViolations(), want)
	}
	Add(t, AdmissionChecksAnswered, 2) // two receipts lost
	s, _ = Summarize(dir)
	if line, _ := s.AdmissionLine(); !strings.HasSuffix(line, "receipt_coverage=0.800") || !s.AdmissionViolations() {
		t.Fatalf("lost receipts: %q, violations %v", line, s.AdmissionViolations())
	}
}
