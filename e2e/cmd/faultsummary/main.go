// Command faultsummary prints the one summary line of `make faults` from
// the records the fault-suite tests wrote (the discovery line, then the
// admission line) (see package faultreport), and
// fails when a figure was never recorded or the suite found a violation.
package main

import (
	"fmt"
	"os"

	"github.com/toolcrib/toolcrib/platform/faultreport"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: faultsummary <records-dir>")
		os.Exit(2)
	}
	s, err := faultreport.Summarize(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultsummary:", err)
		os.Exit(1)
	}
	line, err := s.Line()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultsummary:", err)
		os.Exit(1)
	}
	fmt.Println(line)
	admission, err := s.AdmissionLine()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultsummary:", err)
		os.Exit(1)
	}
	fmt.Println(admission)
	if s.AdmissionViolations() {
		fmt.Fprintln(os.Stderr, "faultsummary: the admission fault suite found violations")
		os.Exit(1)
	}
	t := s.Totals
	if t[faultreport.Agree] != t[faultreport.Rounds] || t[faultreport.UnversionedSideEffectEligible] != 0 ||
		t[faultreport.PartialActivated] != 0 || t[faultreport.CrossAudienceShared] != 0 ||
		t[faultreport.UnknownDialectAccepted] != 0 || t[faultreport.NetworkRefFetched] != 0 ||
		t[faultreport.CASNotLinearizable] != 0 {
		fmt.Fprintln(os.Stderr, "faultsummary: the fault suite found violations")
		os.Exit(1)
	}
}
