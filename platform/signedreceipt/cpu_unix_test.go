//go:build unix

package signedreceipt

import (
	"syscall"
	"testing"
	"time"
)

// cpuPerOp reports the process's CPU time (user and system, GC included)
// per iteration as cpu-ns/op: on a machine shared with other work, ns/op
// is wall time and counts their share too.
func cpuPerOp(b *testing.B) func() {
	start := processCPU(b)
	return func() {
		b.ReportMetric(float64((processCPU(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
