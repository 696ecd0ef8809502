package console

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/oidctest"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/console"
)

// TestConsoleSignsInWithOIDC: the console signs users in by the
// authorization code flow with PKCE against a real OpenID provider
// (zitadel's op on loopback, a public client: no secret), the same
// provider the services trust; the console presents the user's own access
// token to them. A user of the owner group of tenant-a (signed in at the
// provider's login page) gets the review queue with the tour's tool; a
// user of tenant-b, signed in the same way, gets an empty queue; a
// callback whose state is not the console's is refused and makes no
// session. The flow is driven by an HTTP client with a cookie jar
// following the redirects, as a browser does (no Chromium here: the
// browser test signs in with the dev token).
func TestConsoleSignsInWithOIDC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	op := oidctest.Start(t, servicetest.Audience)
	op.CodeClient(servicetest.Audience, "http://127.0.0.1:*/signin/callback")
	w := startWorldWith(t, ctx, servicetest.NewOIDCAuth(t, op), func(c *console.Config) {
		c.OIDCIssuer, c.OIDCClientID = op.URL(), servicetest.Audience
	})

	// signIn runs the flow for the user the provider's login page signs in;
	// it returns the final status and page and the client (its jar holds
	// the console's cookies).
	signIn := func(user string, claims map[string]any) (int, string, *http.Client) {
		t.Helper()
		op.SignInAs(user, claims)
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
		resp, err := c.Get(w.base + "/signin/oidc")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), c
	}

	code, page, _ := signIn(oidctest.User1, map[string]any{principal.DefaultTenantClaim: tenantA,
		principal.DefaultGroupsClaim: []string{"inventory-team", "readers"}})
	if code != http.StatusOK || !strings.Contains(page, toolID) {
		t.Fatalf("the owner after OIDC sign-in: HTTP %d, the queue does not list %s:\n%s", code, toolID, page)
	}
	if !strings.Contains(page, oidctest.User1) {
		t.Fatalf("the page does not name the signed-in subject %q", oidctest.User1)
	}

	code, page, _ = signIn(oidctest.User2, map[string]any{principal.DefaultTenantClaim: tenantB,
		principal.DefaultGroupsClaim: []string{"inventory-team", "readers"}})
	if code != http.StatusOK || strings.Contains(page, toolID) || !strings.Contains(page, oidctest.User2) {
		t.Fatalf("a tenant-b user after OIDC sign-in: HTTP %d, page:\n%s", code, page)
	}

	// A callback the console did not start: refused, no session.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(w.base + "/signin/callback?" + url.Values{"code": {"forged"}, "state": {"forged"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("a forged callback: HTTP %d", resp.StatusCode)
	}
	u, _ := url.Parse(w.base)
	for _, ck := range jar.Cookies(u) {
		if ck.Name == "toolcrib-console" && ck.Value != "" {
			t.Fatal("a forged callback made a session")
		}
	}
}
