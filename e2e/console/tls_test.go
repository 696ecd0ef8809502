package console

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/stack"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/console"
)

// TestConsoleOverTLS runs the console as deployments run it: TLS on its
// pages, mTLS to the registry with a certificate whose SPIFFE ID is no
// service identity. The pages are HTTPS with HSTS; the session cookie is
// `__Host-` prefixed, Secure, HttpOnly and SameSite=Strict, with no
// Domain; a signed-in user's pages load through mTLS with the user's token,
// and another tenant's policy is NOT_FOUND for him through the console as
// it is for his token anywhere.
func TestConsoleOverTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := stack.Start(t, stack.Options{TLS: true})
	if _, err := st.Registry.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tenantA}}); err != nil {
		t.Fatal(err)
	}
	base := st.StartConsole(t, st.ConsoleConfig(t, stack.ReserveAddr(t)))
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("the console serves %s under TLS", base)
	}
	ca, err := os.ReadFile(st.Auth.TLS.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp, err := hc.Get(base + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.Header.Get("Strict-Transport-Security") == "" || resp.Header.Get("Content-Security-Policy") != console.ContentSecurityPolicy {
		t.Errorf("headers %v", resp.Header)
	}
	const marker = `name="csrf" value="`
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatal("no CSRF field on the sign-in page")
	}
	csrf := body[i+len(marker):]
	csrf = csrf[:strings.IndexByte(csrf, '"')]

	// dave of tenant-a, a reader: signed in over HTTPS.
	dave := st.Auth.User(t, "dave", tenantA, "readers")
	req, _ := http.NewRequest(http.MethodPost, base+"/signin/dev", strings.NewReader(url.Values{"token": {dave}, "csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %q", resp.StatusCode, resp.Header.Get(console.ReasonHeader))
	}
	var session string
	for _, sc := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(sc, "__Host-toolcrib-console=") {
			session = sc
		}
	}
	for _, attr := range []string{"Path=/", "HttpOnly", "Secure", "SameSite=Strict"} {
		if !strings.Contains(session, attr) {
			t.Errorf("session cookie %q lacks %s", session, attr)
		}
	}
	if strings.Contains(session, "Domain=") {
		t.Errorf("session cookie %q names a domain", session)
	}

	// The pages load through mTLS with dave's token: his tenant's page,
	// and nothing of another tenant.
	for path, want := range map[string]int{"/queue": http.StatusOK, "/tenant": http.StatusOK, "/tenant?tenant=tenant-b": http.StatusNotFound} {
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b := readAll(t, resp)
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d %q, want %d", path, resp.StatusCode, resp.Header.Get(console.ReasonHeader), want)
		}
		if want == http.StatusNotFound && resp.Header.Get(console.ReasonHeader) != "NOT_FOUND" {
			t.Errorf("GET %s: reason %q, body %.200s", path, resp.Header.Get(console.ReasonHeader), b)
		}
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}
