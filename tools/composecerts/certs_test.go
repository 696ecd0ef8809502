// Package composecerts tests deploy/compose/certs.sh, the one-shot `certs`
// service of the compose deployment: the certificates it makes must give the
// services TLS and mTLS with their SPIFFE identities, be kept while valid and
// be reissued by --renew or near expiry. Run from tools/:
//
//	GOWORK=off go test ./composecerts/
package composecerts

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var services = []string{"registry", "discovery", "admission", "lease", "gateway", "console"}

const trustDomain = "toolcrib.compose"

// certs runs certs.sh into dir with extra environment and arguments.
func certs(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	script, err := filepath.Abs("../../deploy/compose/certs.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", append([]string{script}, args...)...)
	cmd.Env = append(append(os.Environ(), "TLS_DIR="+dir), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("certs.sh %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pool(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		t.Fatalf("%s: no certificate", path)
	}
	return p
}

func pair(t *testing.T, dir string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// handshake serves one mTLS connection as the services do (TLS 1.3, client
// certificate required and verified against the server's ca.crt) and dials
// it with cfg; it returns the client certificate the server saw and the
// client's error.
func handshake(t *testing.T, serverDir string, cfg *tls.Config) (*x509.Certificate, error) {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair(t, serverDir)},
		ClientCAs:    pool(t, filepath.Join(serverDir, "ca.crt")),
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	seen := make(chan *x509.Certificate, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			seen <- nil
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if tc.Handshake() != nil {
			seen <- nil
			return
		}
		seen <- tc.ConnectionState().PeerCertificates[0]
		_, _ = tc.Write([]byte("k"))
	}()
	cfg.MinVersion = tls.VersionTLS13
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", l.Addr().String(), cfg)
	if err == nil {
		// TLS 1.3: a refused client certificate surfaces on the first read.
		_, err = io.ReadFull(c, make([]byte, 1))
		c.Close()
	}
	select {
	case s := <-seen:
		return s, err
	case <-time.After(5 * time.Second):
		t.Fatal("server did not finish the handshake")
		return nil, nil
	}
}

// Every service gets a certificate from the compose CA with its SPIFFE ID,
// its compose DNS name, localhost and 127.0.0.1 (the health check), usable
// as server and client; the services reach each other over mTLS and the
// server sees the caller's SPIFFE ID; a client without a certificate, with
// a certificate of another CA, or dialling a name the certificate does not
// carry is refused.
func TestCertsGiveMutualTLSWithServiceIdentities(t *testing.T) {
	dir := t.TempDir()
	certs(t, dir, nil)
	roots := pool(t, filepath.Join(dir, "trust", "ca.crt"))
	for _, svc := range services {
		c := readCert(t, filepath.Join(dir, svc, "tls.crt"))
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: svc,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: %v", svc, err)
		}
		if len(c.URIs) != 1 || c.URIs[0].String() != "spiffe://"+trustDomain+"/toolcrib/"+svc {
			t.Errorf("%s: URI SANs %v, want exactly spiffe://%s/toolcrib/%s", svc, c.URIs, trustDomain, svc)
		}
		if !slices.Equal(c.DNSNames, []string{svc, "localhost"}) || len(c.IPAddresses) != 1 || !c.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
			t.Errorf("%s: DNS %v IP %v, want [%s localhost] [127.0.0.1]", svc, c.DNSNames, c.IPAddresses, svc)
		}
		if c.IsCA {
			t.Errorf("%s: a CA certificate", svc)
		}
		if fi, err := os.Stat(filepath.Join(dir, svc, "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: key mode %v, %v; want 0600", svc, fi.Mode().Perm(), err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "ca")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("ca/: mode %v, %v; want 0700 (the CA key is mounted nowhere)", fi.Mode().Perm(), err)
	}
	for _, name := range []string{"redis", "postgres"} {
		c := readCert(t, filepath.Join(dir, name, "tls.crt"))
		if len(c.URIs) != 0 || !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) || !slices.Contains(c.DNSNames, name) {
			t.Errorf("%s: URIs %v, usages %v, DNS %v; want no URI, server auth only, DNS %s", name, c.URIs, c.ExtKeyUsage, c.DNSNames, name)
		}
	}
	cli := readCert(t, filepath.Join(dir, "cli", "tls.crt"))
	if len(cli.URIs) != 0 || !slices.Equal(cli.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("cli: URIs %v, usages %v; want no URI (never a service role), client auth only", cli.URIs, cli.ExtKeyUsage)
	}

	client := func(name, from string) *tls.Config {
		cfg := &tls.Config{RootCAs: pool(t, filepath.Join(dir, from, "ca.crt")), ServerName: name}
		if from != "" {
			cfg.Certificates = []tls.Certificate{pair(t, filepath.Join(dir, from))}
		}
		return cfg
	}
	// The calls of DESIGN §2, and the health check and CLI on 127.0.0.1.
	for _, call := range [][3]string{
		{"lease", "admission", "admission"}, {"admission", "registry", "registry"}, {"discovery", "admission", "admission"},
		{"gateway", "discovery", "discovery"}, {"gateway", "lease", "lease"}, {"admission", "admission", "127.0.0.1"},
		{"cli", "registry", "127.0.0.1"},
	} {
		from, to, name := call[0], call[1], call[2]
		peer, err := handshake(t, filepath.Join(dir, to), client(name, from))
		if err != nil || peer == nil {
			t.Errorf("%s → %s (%s): %v", from, to, name, err)
			continue
		}
		if from != "cli" && (len(peer.URIs) != 1 || peer.URIs[0].String() != "spiffe://"+trustDomain+"/toolcrib/"+from) {
			t.Errorf("%s → %s: server saw URIs %v", from, to, peer.URIs)
		}
	}

	noCert := &tls.Config{RootCAs: pool(t, filepath.Join(dir, "trust", "ca.crt")), ServerName: "admission"}
	if peer, err := handshake(t, filepath.Join(dir, "admission"), noCert); err == nil || peer != nil {
		t.Errorf("a client without a certificate was served (err %v)", err)
	}
	other := t.TempDir()
	certs(t, other, nil)
	foreign := client("admission", "lease")
	foreign.Certificates = []tls.Certificate{pair(t, filepath.Join(other, "lease"))}
	if peer, err := handshake(t, filepath.Join(dir, "admission"), foreign); err == nil || peer != nil {
		t.Errorf("a client certificate from another CA was accepted (err %v)", err)
	}
	var hostErr x509.HostnameError
	if _, err := handshake(t, filepath.Join(dir, "admission"), client("lease", "gateway")); !errors.As(err, &hostErr) {
		t.Errorf("dialling lease on admission's listener: %v, want a host name error", err)
	}
}

func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range append(slices.Clone(services), "redis", "postgres", "cli") {
		for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
			b, err := os.ReadFile(filepath.Join(dir, name, f))
			if err != nil {
				t.Fatal(err)
			}
			out[name+"/"+f] = b
		}
	}
	return out
}

// A rerun keeps valid certificates byte for byte (the `certs` service runs
// at every `up`); --renew reissues every leaf with a new key under the same
// CA, leaving no temporary files in the mounted directories.
func TestCertsKeptUntilRenewed(t *testing.T) {
	dir := t.TempDir()
	certs(t, dir, nil)
	first := snapshot(t, dir)
	if out := certs(t, dir, nil); out != "" {
		t.Errorf("rerun printed %q, want nothing (nothing to do)", out)
	}
	for k, v := range snapshot(t, dir) {
		if !bytes.Equal(v, first[k]) {
			t.Errorf("rerun changed %s", k)
		}
	}
	out := certs(t, dir, nil, "--renew")
	if n := strings.Count(out, "certs: issued "); n != 9 {
		t.Errorf("--renew issued %d certificates, want 9:\n%s", n, out)
	}
	renewed := snapshot(t, dir)
	for _, name := range append(slices.Clone(services), "redis", "postgres", "cli") {
		if bytes.Equal(renewed[name+"/tls.key"], first[name+"/tls.key"]) || bytes.Equal(renewed[name+"/tls.crt"], first[name+"/tls.crt"]) {
			t.Errorf("%s: --renew kept the key or the certificate", name)
		}
		if !bytes.Equal(renewed[name+"/ca.crt"], first[name+"/ca.crt"]) {
			t.Errorf("%s: --renew changed the CA", name)
		}
		if _, err := tls.LoadX509KeyPair(filepath.Join(dir, name, "tls.crt"), filepath.Join(dir, name, "tls.key")); err != nil {
			t.Errorf("%s: renewed pair: %v", name, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".new-*"))
	if len(left) != 0 {
		t.Errorf("temporary directories left: %v", left)
	}
	if err := exec.Command("/bin/sh", "../../deploy/compose/certs.sh", "--bogus").Run(); err == nil {
		t.Error("certs.sh --bogus succeeded")
	}
}

// A certificate within RENEW_DAYS of expiry is reissued by a plain rerun
// (cron runs `docker-compose run --rm certs`); one further away is kept.
func TestCertsReissueNearExpiry(t *testing.T) {
	dir := t.TempDir()
	certs(t, dir, []string{"CERT_DAYS=5"})
	before := snapshot(t, dir)
	certs(t, dir, []string{"RENEW_DAYS=3"})
	for k, v := range snapshot(t, dir) {
		if !bytes.Equal(v, before[k]) {
			t.Errorf("%s changed with 5 days left and RENEW_DAYS=3", k)
		}
	}
	out := certs(t, dir, []string{"RENEW_DAYS=10"})
	if n := strings.Count(out, "certs: issued "); n != 9 {
		t.Errorf("with 5 days left and RENEW_DAYS=10, issued %d, want 9:\n%s", n, out)
	}
	if left := time.Until(readCert(t, filepath.Join(dir, "admission", "tls.crt")).NotAfter); left < 29*24*time.Hour {
		t.Errorf("reissued certificate valid %v, want 30 days", left)
	}
}
