package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TLSServer is a throwaway Postgres cluster a test started on loopback with
// `ssl = on`, accepting only TLS connections (hostssl, scram-sha-256), so
// the shared cluster's configuration is never touched.
type TLSServer struct {
	// Port is its port on 127.0.0.1.
	Port int
	// Password is the password of the user postgres.
	Password string
	dir      string
}

// URL returns postgres://postgres:<password>@host:port/postgres with query.
func (s *TLSServer) URL(host, query string) string {
	return fmt.Sprintf("postgres://postgres:%s@%s/postgres?%s", s.Password, net.JoinHostPort(host, strconv.Itoa(s.Port)), query)
}

// Log returns the server's log.
func (s *TLSServer) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	return string(b)
}

// StartTLSServer runs initdb and pg_ctl (Debian's, under
// /usr/lib/postgresql/*/bin; the test is skipped when they are absent) on a
// free port, serving certFile/keyFile. As root it runs them as the user
// postgres, which initdb requires.
func StartTLSServer(t testing.TB, certFile, keyFile string) *TLSServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Skip("pgtest: no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)")
	}
	bin := filepath.Dir(bins[len(bins)-1])
	dir, err := os.MkdirTemp("", "toolcrib-pgtls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var run func(name string, args ...string) *exec.Cmd
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("pgtest: running as root and there is no user postgres to run initdb as: %v", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		run = func(name string, args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
		}
	} else {
		run = func(name string, args ...string) *exec.Cmd { return exec.Command(filepath.Join(bin, name), args...) }
	}
	s := &TLSServer{Password: "pg-" + strconv.FormatInt(time.Now().UnixNano(), 36), dir: dir}
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if uid >= 0 {
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	copyFile := func(from, name string, mode os.FileMode) string {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		return write(name, b, mode)
	}
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	pw := write("pwfile", []byte(s.Password+"\n"), 0o600)
	cert := copyFile(certFile, "server.crt", 0o644)
	key := copyFile(keyFile, "server.key", 0o600)
	data := filepath.Join(dir, "data")
	if out, err := run("initdb", "-D", data, "-U", "postgres", "--auth=scram-sha-256", "--pwfile="+pw).CombinedOutput(); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	// Probe a free port; retry if another process takes it first.
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.Port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		conf := strings.Join([]string{
			"listen_addresses = '127.0.0.1'",
			fmt.Sprintf("port = %d", s.Port),
			"unix_socket_directories = '" + dir + "'",
			"ssl = on",
			"ssl_cert_file = '" + cert + "'",
			"ssl_key_file = '" + key + "'",
			"max_connections = 20",
			"shared_buffers = 16MB",
			"fsync = off",
		}, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(data, "postgresql.auto.conf"), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		hba := "local all all scram-sha-256\nhostssl all all 127.0.0.1/32 scram-sha-256\nhostnossl all all 0.0.0.0/0 reject\n"
		if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
			t.Fatal(err)
		}
		if uid >= 0 {
			_ = os.Chown(filepath.Join(data, "postgresql.auto.conf"), uid, gid)
			_ = os.Chown(filepath.Join(data, "pg_hba.conf"), uid, gid)
		}
		out, err := run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "30", "start").CombinedOutput()
		if err == nil {
			break
		}
		if attempt == 2 {
			t.Fatalf("pgtest: pg_ctl start: %v\n%s\n%s", err, out, s.Log())
		}
	}
	t.Cleanup(func() { _ = run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop").Run() })
	return s
}
