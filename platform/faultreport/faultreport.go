// Package faultreport carries the figures of the discovery fault suite from
// the tests that measure them to the one summary line `make faults` prints.
//
// A test records what it counted with [Add] (a round, an agreement with the
// oracle, an unversioned tool found eligible, ...). When
// TOOLCRIB_FAULTS_DIR is set, every record is appended as a JSON line to a
// file in that directory; [Summarize] adds them up. A figure no test
// recorded is reported as missing, never as zero: the line only says what
// the tests themselves counted.
//
// It lives in platform so that tests of every module can record: the e2e
// fault suite, and the pointer-CAS linearizability check inside the
// discovery service's store.
package faultreport

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// DirEnv names the directory the records go to.
const DirEnv = "TOOLCRIB_FAULTS_DIR"

// Counters of the summary line, in print order.
const (
	Rounds                        = "rounds"
	Agree                         = "agree"
	UnversionedSideEffectEligible = "unversioned_side_effect_eligible"
	PartialActivated              = "partial_activated"
	CrossAudienceShared           = "cross_audience_shared"
	UnknownDialectAccepted        = "unknown_dialect_accepted"
	NetworkRefFetched             = "network_ref_fetched"
	// CASChecks counts linearizability checks of the pointer CAS history;
	// CASNotLinearizable counts those that failed. The line prints
	// cas_linearizable=true only when at least one check ran and none failed.
	CASChecks          = "cas_checks"
	CASNotLinearizable = "cas_not_linearizable"
)

// Counters of the admission summary line (the admission fault suite,
// e2e/admission), in print order. Receipt coverage is printed as
// AdmissionReceiptsStored / AdmissionChecksAnswered.
const (
	AdmissionRounds          = "admission_rounds"
	AdmissionAgree           = "admission_agree"
	AdmissionCrossTenantHits = "admission_cross_tenant_hits"
	// AdmissionAllowAfterWindow counts ALLOWs decided by a replica that could
	// not prove freshness (after its validity window).
	AdmissionAllowAfterWindow = "admission_allow_after_window"
	// AdmissionAllowAfterRevokeBound counts ALLOWs decided more than the
	// revocation bound (1 s) after a revoking commit on a connected replica.
	AdmissionAllowAfterRevokeBound = "admission_allow_after_revoke_bound"
	// AdmissionLeaseReuseAccepted counts Verify answers that accepted a lease
	// already used, a proof made for another lease, or another audience.
	AdmissionLeaseReuseAccepted = "admission_lease_reuse_accepted"
	AdmissionChecksAnswered     = "admission_checks_answered"
	AdmissionReceiptsStored     = "admission_receipts_stored"
)

var admissionCounters = []string{AdmissionRounds, AdmissionAgree, AdmissionCrossTenantHits, AdmissionAllowAfterWindow,
	AdmissionAllowAfterRevokeBound, AdmissionLeaseReuseAccepted, AdmissionChecksAnswered, AdmissionReceiptsStored}

var counters = []string{Rounds, Agree, UnversionedSideEffectEligible, PartialActivated, CrossAudienceShared,
	UnknownDialectAccepted, NetworkRefFetched, CASChecks, CASNotLinearizable}

type record struct {
	Test    string `json:"test"`
	Counter string `json:"counter"`
	Value   int64  `json:"value"`
}

var mu sync.Mutex

// Add records that test t counted n for counter. Without DirEnv it does
// nothing, so the suite runs the same under `make test`.
func Add(t testing.TB, counter string, n int64) {
	t.Helper()
	dir := os.Getenv(DirEnv)
	if dir == "" {
		return
	}
	b, err := json.Marshal(record{Test: t.Name(), Counter: counter, Value: n})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("records-%d.jsonl", os.Getpid())), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// Summary is the sum of every record.
type Summary struct {
	// Totals by counter; a counter no test recorded is absent.
	Totals map[string]int64
	// Tests lists, per counter, the tests that recorded it.
	Tests map[string][]string
}

// Summarize reads every record file in dir.
func Summarize(dir string) (Summary, error) {
	s := Summary{Totals: map[string]int64{}, Tests: map[string][]string{}}
	files, err := filepath.Glob(filepath.Join(dir, "records-*.jsonl"))
	if err != nil {
		return s, err
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return s, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				f.Close()
				return s, fmt.Errorf("%s: %w", name, err)
			}
			s.Totals[r.Counter] += r.Value
			s.Tests[r.Counter] = append(s.Tests[r.Counter], r.Test)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (s Summary) missing(cs []string) error {
	var missing []string
	for _, c := range cs {
		if _, ok := s.Totals[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return errors.New("faultreport: no test recorded " + strings.Join(missing, ", "))
	}
	return nil
}

// AdmissionLine renders the admission summary line. It fails when a
// counter was never recorded or no Check was answered.
func (s Summary) AdmissionLine() (string, error) {
	if err := s.missing(admissionCounters); err != nil {
		return "", err
	}
	t := s.Totals
	if t[AdmissionChecksAnswered] == 0 {
		return "", errors.New("faultreport: receipt coverage over no Check")
	}
	return fmt.Sprintf("admission: rounds=%d agree=%d cross_tenant_hits=%d allow_after_window=%d allow_after_revoke_bound=%d lease_reuse_accepted=%d receipt_coverage=%.3f",
		t[AdmissionRounds], t[AdmissionAgree], t[AdmissionCrossTenantHits], t[AdmissionAllowAfterWindow],
		t[AdmissionAllowAfterRevokeBound], t[AdmissionLeaseReuseAccepted],
		float64(t[AdmissionReceiptsStored])/float64(t[AdmissionChecksAnswered])), nil
}

// AdmissionViolations reports whether the admission suite found a
// violation: a disagreement, a cross-tenant hit, an ALLOW past the window
// or the revocation bound, a reused lease accepted, or a lost receipt.
func (s Summary) AdmissionViolations() bool {
	t := s.Totals
	return t[AdmissionAgree] != t[AdmissionRounds] || t[AdmissionCrossTenantHits] != 0 || t[AdmissionAllowAfterWindow] != 0 ||
		t[AdmissionAllowAfterRevokeBound] != 0 || t[AdmissionLeaseReuseAccepted] != 0 ||
		t[AdmissionReceiptsStored] != t[AdmissionChecksAnswered]
}

// Line renders the summary line. It fails when a counter was never
// recorded.
func (s Summary) Line() (string, error) {
	var missing []string
	for _, c := range counters {
		if _, ok := s.Totals[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", errors.New("faultreport: no test recorded " + strings.Join(missing, ", "))
	}
	t := s.Totals
	linearizable := t[CASChecks] > 0 && t[CASNotLinearizable] == 0
	return fmt.Sprintf("faults: rounds=%d agree=%d unversioned_side_effect_eligible=%d partial_activated=%d cross_audience_shared=%d unknown_dialect_accepted=%d network_ref_fetched=%d cas_linearizable=%t",
		t[Rounds], t[Agree], t[UnversionedSideEffectEligible], t[PartialActivated], t[CrossAudienceShared],
		t[UnknownDialectAccepted], t[NetworkRefFetched], linearizable), nil
}
