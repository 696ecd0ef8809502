package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ServerBinary is Debian's redis-server; [StartServer] skips the test when
// it is absent (CI installs it).
const ServerBinary = "/usr/bin/redis-server"

// Server is a redis-server (or sentinel) a test started on loopback, in its
// own directory; it is killed when the test ends.
type Server struct {
	// Port is the port it listens on (the TLS port when it serves TLS).
	Port int
	// Dir holds its configuration file and log.
	Dir string
	cmd *exec.Cmd
}

// Addr is 127.0.0.1:Port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// FreePort returns a loopback port free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartServer runs redis-server with the configuration lines conf (plus
// `bind 127.0.0.1`, no persistence, and `dir`) and waits until port
// accepts connections. sentinel runs it in Sentinel mode (which rewrites
// its configuration file, so it gets its own).
func StartServer(t testing.TB, port int, sentinel bool, conf ...string) *Server {
	t.Helper()
	if _, err := os.Stat(ServerBinary); err != nil {
		t.Skipf("redistest: %s is absent (apt-get install redis-server redis-sentinel): %v", ServerBinary, err)
	}
	dir := t.TempDir()
	lines := append([]string{"bind 127.0.0.1", "save \"\"", "appendonly no", "dir " + dir, "logfile " + filepath.Join(dir, "log")}, conf...)
	file := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{file}
	if sentinel {
		args = append(args, "--sentinel")
	}
	cmd := exec.Command(ServerBinary, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Server{Port: port, Dir: dir, cmd: cmd}
	t.Cleanup(s.Kill)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Fatalf("redistest: redis-server on %d did not start: %v\n%s", port, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill ends the server at once (SIGKILL): no shutdown, no last write.
func (s *Server) Kill() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// Log returns the server's log so far (for a failing test's message).
func (s *Server) Log() string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "log"))
	if err != nil {
		return fmt.Sprint(err)
	}
	return string(b)
}

// Sentinel is one primary, two replicas and one sentinel (quorum 1,
// down-after 500ms) started by a test; the primary is named [MasterName].
// With two replicas a write acknowledged by one ([redisclient.Client.AckReplicas]
// = 1) still finds a replica to acknowledge it after a failover.
type Sentinel struct {
	Primary  *Server
	Replicas []*Server
	Sentinel *Server
}

// MasterName is the name the sentinel monitors the primary under.
const MasterName = "toolcrib"

// URL is the redis-sentinel:// URL of the deployment, database 0.
func (s *Sentinel) URL() string { return "redis-sentinel://" + s.Sentinel.Addr() + "/" + MasterName }

// StartSentinel starts the deployment and waits until the replicas are in
// sync and the sentinel knows them, so a failover can promote one. extra
// configuration lines go to every data node.
func StartSentinel(t testing.TB, extra ...string) *Sentinel {
	t.Helper()
	pp := FreePort(t)
	s := &Sentinel{}
	s.Primary = StartServer(t, pp, false, append([]string{fmt.Sprintf("port %d", pp)}, extra...)...)
	for range 2 {
		rp := FreePort(t)
		s.Replicas = append(s.Replicas, StartServer(t, rp, false, append([]string{fmt.Sprintf("port %d", rp), fmt.Sprintf("replicaof 127.0.0.1 %d", pp)}, extra...)...))
	}
	sp := FreePort(t)
	s.Sentinel = StartServer(t, sp, true,
		fmt.Sprintf("port %d", sp),
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", MasterName, pp),
		fmt.Sprintf("sentinel down-after-milliseconds %s 500", MasterName),
		fmt.Sprintf("sentinel failover-timeout %s 3000", MasterName),
	)
	deadline := time.Now().Add(30 * time.Second)
	for {
		info := cli(t, s.Sentinel, "SENTINEL", "REPLICAS", MasterName)
		ready := true
		for _, r := range s.Replicas {
			ready = ready && strings.Contains(info, strconv.Itoa(r.Port)) && strings.Contains(cli(t, r, "INFO", "replication"), "master_link_status:up")
		}
		if ready {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the sentinel never saw the replicas in sync:\n%s\n%s", info, s.Sentinel.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cli runs one command with redis-cli (no credentials: the sentinel and
// the default user).
func cli(t testing.TB, s *Server, args ...string) string {
	t.Helper()
	out, _ := exec.Command("redis-cli", append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port)}, args...)...).CombinedOutput()
	return string(out)
}
