package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// pkiFiles reads every file of a dev PKI, to see what changed.
func pkiFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range append(append([]string{"ca"}, devServices...), devClientName) {
		for _, f := range []string{name + ".pem", name + "-key.pem"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			out[f] = string(b)
		}
	}
	return out
}

// The dev PKI: a CA and, per service, an ECDSA P-256 certificate for server
// and client use naming the service's SPIFFE ID, localhost and 127.0.0.1,
// verified by the CA; the client certificate names no service. Files are
// kept while valid, a certificate close to its end is renewed alone, a CA
// close to its end renews everything, and a certificate of another CA is
// replaced.
func TestDevPKIMadeKeptAndRenewed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	now := time.Now()
	p, made, err := ensureDevPKI(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := "CA,registry,discovery,admission,lease,gateway,console,client"; strings.Join(made, ",") != want {
		t.Fatalf("made %v; want %s", made, want)
	}
	ca, _, err := loadPair(p.CAFile, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	// The console's certificate is made like a service's, but its SPIFFE
	// ID is no service identity.
	if slices.Contains(strings.Split(devIdentities(), ","), "spiffe://toolcrib.dev/toolcrib/console") {
		t.Errorf("the console's certificate is a service identity: %v", devIdentities())
	}
	for _, svc := range append(slices.Clone(devServices), devConsole) {
		cert, key := p.certFiles(svc)
		leaf, k, err := loadPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		if k.Curve != elliptic.P256() {
			t.Errorf("%s key curve %v", svc, k.Curve.Params().Name)
		}
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://toolcrib.dev/toolcrib/"+svc {
			t.Errorf("%s URIs %v", svc, leaf.URIs)
		}
		if len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal([]byte{127, 0, 0, 1}) {
			t.Errorf("%s IPs %v", svc, leaf.IPAddresses)
		}
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			for _, host := range []string{"localhost", "127.0.0.1"} {
				if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
					t.Errorf("%s as %v for %s: %v", svc, usage, host, err)
				}
			}
		}
		if info, err := os.Stat(key); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s key mode %v %v", svc, info.Mode(), err)
		}
	}
	cert, key := p.certFiles(devClientName)
	client, _, err := loadPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(client.URIs) != 1 || client.URIs[0].String() != "spiffe://toolcrib.dev/client" || len(client.IPAddresses) != 0 {
		t.Errorf("client certificate names %v %v", client.URIs, client.IPAddresses)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("the client certificate serves as a server certificate")
	}

	first := pkiFiles(t, dir)
	// Still valid for longer than the renewal margin: all kept.
	if _, made, err := ensureDevPKI(dir, now.Add(devLeafLifetime-devLeafRenewal-time.Hour)); err != nil || len(made) != 0 {
		t.Fatalf("a day later made %v, %v; want nothing", made, err)
	}
	if got := pkiFiles(t, dir); !equalMaps(got, first) {
		t.Fatal("files changed although every certificate is valid")
	}
	// Within the renewal margin of the certificates, not of the CA.
	if _, made, err := ensureDevPKI(dir, now.Add(devLeafLifetime-devLeafRenewal+time.Hour)); err != nil ||
		strings.Join(made, ",") != "registry,discovery,admission,lease,gateway,console,client" {
		t.Fatalf("close to the certificates' end made %v, %v", made, err)
	}
	if got := pkiFiles(t, dir); got["ca.pem"] != first["ca.pem"] || got["registry.pem"] == first["registry.pem"] {
		t.Fatal("renewing the certificates changed the CA or kept a certificate")
	}
	// Within the CA's renewal margin: everything anew.
	later := now.Add(devCALifetime - devCARenewal + time.Hour)
	if _, made, err := ensureDevPKI(dir, later); err != nil || len(made) != 8 || made[0] != "CA" {
		t.Fatalf("close to the CA's end made %v, %v", made, err)
	}
	// A valid certificate of another CA (a dev directory copied between
	// checkouts) is replaced.
	other := filepath.Join(t.TempDir(), "other")
	if _, _, err := ensureDevPKI(other, later); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"lease.pem", "lease-key.pem"} {
		b, err := os.ReadFile(filepath.Join(other, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, made, err := ensureDevPKI(dir, later.Add(time.Hour)); err != nil || strings.Join(made, ",") != "lease" {
		t.Fatalf("with lease's certificate from another CA made %v, %v; want lease", made, err)
	}
	if _, ok := any(client.PublicKey).(*ecdsa.PublicKey); !ok {
		t.Fatalf("client key %T", client.PublicKey)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A service `dev up` started refuses a plaintext client and a TLS client
// without the dev client certificate; the CLI reaches every service with
// the dev CA and client certificate it finds by default; `--plaintext`
// says why it fails; the gateway's MCP endpoint serves HTTPS with a
// certificate of the dev CA.
func TestDevUpRefusesPlaintextAndTheCLITrustsTheDevCA(t *testing.T) {
	d := startDevUp(t)
	addrs := []string{d.grpcAddr["registry"], d.grpcAddr["discovery"], d.grpcAddr["admission"], d.grpcAddr["lease"], d.grpcAddr["gateway"]}
	if out, err := cliRun(append([]string{"health"}, addrs...)...); err != nil || strings.Count(out, "SERVING") != 5 {
		t.Fatalf("health with the dev CA: %v\n%s", err, out)
	}
	if out, err := cliRun("--registry", d.grpcAddr["registry"], "tenant", "put", "tenant-a"); err != nil {
		t.Fatalf("tenant put with the dev CA and the admin token: %v\n%s", err, out)
	}
	if out, err := cliRun("--registry", d.grpcAddr["registry"], "server", "list"); err != nil {
		t.Fatalf("server list with the dev CA and the admin token: %v\n%s", err, out)
	}

	// A plaintext gRPC client: refused by every service.
	for svc, addr := range d.grpcAddr {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		conn.Close()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s answered a plaintext client: %v", svc, err)
		}
	}
	// The CLI with --plaintext: refused, and told why.
	_, err := cliRun("--plaintext", "--registry", d.grpcAddr["registry"], "server", "list")
	if msg := describe(err); status.Code(err) != codes.Unavailable ||
		!strings.Contains(msg, "the service may speak TLS and this CLI called in plaintext: --plaintext; call it without --plaintext") {
		t.Fatalf("--plaintext against TLS: %v", msg)
	}
	out, err := cliRun("--plaintext", "health", d.grpcAddr["admission"])
	if err == nil || !strings.Contains(out, d.grpcAddr["admission"]+"\tUnavailable: ") ||
		!strings.Contains(out, "\n  the service may speak TLS and this CLI called in plaintext: --plaintext") {
		t.Fatalf("health --plaintext against TLS: %v\n%s", err, out)
	}
	// TLS with the dev CA but no client certificate: refused (mTLS).
	if _, err := cliRun("--tls-client-cert-file", "", "--tls-client-key-file", "", "--registry", d.grpcAddr["registry"], "server", "list"); status.Code(err) != codes.Unavailable {
		t.Fatalf("without a client certificate: %v; want UNAVAILABLE", err)
	}

	// MCP over HTTPS: the protected-resource metadata with the dev CA; a
	// plain HTTP request is answered 400 by the TLS listener.
	caPEM, err := os.ReadFile(devCAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := hc.Get("https://" + d.mcpAddr + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatalf("MCP metadata over HTTPS with the dev CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Fatalf("MCP metadata over HTTPS: %s", resp.Status)
	}
	resp, err = (&http.Client{Timeout: 5 * time.Second}).Get("http://" + d.mcpAddr + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain HTTP to the MCP port: %s; want 400 from the TLS listener", resp.Status)
	}
}

// `dev up --plaintext` starts every service without TLS, each one warning
// at start-up; the CLI reaches them with --plaintext (and by default, with
// no dev CA made), and a CLI speaking TLS is told the service is plaintext.
func TestDevUpPlaintextWarnsAndWorks(t *testing.T) {
	d := startDevUp(t, "--plaintext")
	logs := d.logs.String()
	for _, svc := range devServices {
		if !strings.Contains(logs, "level=WARN msg=\"TLS is off: the listeners serve plaintext; bearer tokens, leases and receipts cross the network in the clear (set --tls-cert-file and --tls-key-file)\" service="+svc+"\n") {
			t.Errorf("%s did not warn that TLS is off:\n%s", svc, logs)
		}
	}
	if !strings.Contains(d.errOut.String(), "toolcrib dev: --plaintext: the services run WITHOUT TLS") {
		t.Errorf("dev up --plaintext did not say so:\n%s", d.errOut.String())
	}
	if _, err := os.Stat(devCAFile); !os.IsNotExist(err) {
		t.Fatalf("dev up --plaintext made a CA: %v", err)
	}
	for _, args := range [][]string{{"--plaintext"}, nil} {
		if out, err := cliRun(append(args, "--registry", d.grpcAddr["registry"], "server", "list")...); err != nil {
			t.Fatalf("server list %v against plaintext: %v\n%s", args, err, out)
		}
	}
	p, _, err := ensureDevPKI(filepath.Join(t.TempDir(), "elsewhere"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, err = cliRun("--tls-ca-file", p.CAFile, "--registry", d.grpcAddr["registry"], "server", "list")
	if msg := describe(err); status.Code(err) != codes.Unavailable || !strings.Contains(msg, "the service speaks plaintext and this CLI TLS") {
		t.Fatalf("TLS against plaintext: %v", msg)
	}
}
