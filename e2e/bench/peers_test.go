package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The peers of `make bench-peers` (not in CI): programs built by the make
// target from the module proxy into a temporary folder, named by these
// variables; a test whose program is not named skips.
const (
	envPeerOPA  = "TOOLCRIB_PEER_OPA"
	envPeerVMCP = "TOOLCRIB_PEER_VMCP"
)

// peerInFlight is the calls in flight of every throughput arm.
const peerInFlight = 16

// peerSlices and peerSlice: the arms take turns, peerSlice each,
// peerSlices times, so a change in the load of the shared machine falls on
// all arms alike.
const (
	peerSlices = 10
	peerSlice  = 500 * time.Millisecond
)

// peerArm adds up an arm's slices: calls, wall time and the CPU time of
// the process that serves it.
type peerArm struct {
	calls int64
	took  time.Duration
	cpu   time.Duration
}

func (a peerArm) qps() float64 { return float64(a.calls) / a.took.Seconds() }

// cpuMsPer1k is the serving process's CPU per thousand calls, in ms.
func (a peerArm) cpuMsPer1k() float64 {
	return float64(a.cpu.Microseconds()) / 1000 / float64(a.calls) * 1000
}

// slice runs call from n goroutines for d and adds the calls, the time and
// the CPU time of process pid (user + system) to a.
func (a *peerArm) slice(t *testing.T, pid, n int, d time.Duration, call func(ctx context.Context) error) {
	t.Helper()
	ctx := context.Background()
	cpu0 := processCPU(t, pid)
	var calls atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	stop := start.Add(d)
	for range n {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := call(ctx); err != nil {
					errs <- err
					return
				}
				calls.Add(1)
			}
		})
	}
	wg.Wait()
	a.took += time.Since(start)
	a.cpu += processCPU(t, pid) - cpu0
	a.calls += calls.Load()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// clockTick is the unit of /proc/<pid>/stat's utime and stime (USER_HZ,
// 100 on Linux).
const clockTick = 10 * time.Millisecond

// processCPU is the user and system CPU time process pid has used.
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("the CPU time of process %d: %v", pid, err)
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis are space-separated, utime and stime the 12th
	// and 13th of them.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat has %d fields after the name", pid, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(u+st) * clockTick
}

// freePort is a loopback address nothing listens on (for a peer that
// takes its address as a flag).
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// startProcess runs a peer program until the test ends, its output in
// the test log when the test fails.
func startProcess(t *testing.T, name string, args []string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output (last 4 KiB):\n%s", name, out.tail(4096))
		}
	})
	return cmd
}

// syncBuffer is an io.Writer safe for a process's stdout and stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	if len(s.b) > 1<<20 {
		s.b = append(s.b[:0], s.b[len(s.b)-1<<19:]...)
	}
	return len(p), nil
}

func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b[max(0, len(s.b)-n):])
}

// waitFor polls ready until it returns nil or d passed.
func waitFor(t *testing.T, d time.Duration, what string, ready func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := ready()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not ready after %s: %v", what, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// childLine reads the line starting with prefix from r (a child process's
// stdout), skipping others; the rest of the line is returned.
func childLine(t *testing.T, r io.Reader, prefix string, d time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				got <- rest
				// Keep reading so the child never blocks on a full pipe.
				_, _ = io.Copy(io.Discard, r)
				return
			}
		}
		close(got)
	}()
	select {
	case s, ok := <-got:
		if !ok {
			t.Fatalf("the child ended without a %q line", prefix)
		}
		return s
	case <-time.After(d):
		t.Fatalf("no %q line from the child in %s", prefix, d)
	}
	return ""
}

func stamp() string { return time.Now().UTC().Format(time.RFC3339) }
