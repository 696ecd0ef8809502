package console

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/stack"
	"github.com/toolcrib/toolcrib/services/console"
)

// TestConsoleWithAServiceDown: a console whose registry does not answer
// still signs users in (that needs only its verifier and Redis), and its
// pages answer 503 SERVICE_UNAVAILABLE within its call timeout, never a
// page built from nothing.
func TestConsoleWithAServiceDown(t *testing.T) {
	st := stack.Start(t, stack.Options{})
	cfg := st.ConsoleConfig(t, stack.ReserveAddr(t))
	cfg.RegistryAddr = stack.ReserveAddr(t) // nothing listens there
	cfg.CallTimeout = 2 * time.Second
	base := st.StartConsole(t, cfg)

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(base + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	const marker = `name="csrf" value="`
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatal("no CSRF field on the sign-in page")
	}
	csrf := body[i+len(marker):]
	csrf = csrf[:strings.IndexByte(csrf, '"')]
	form := url.Values{"token": {st.Auth.User(t, "bob", tenantA, "inventory-team")}, "csrf": {csrf}}
	resp, err = hc.PostForm(base+"/signin/dev", form)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %q", resp.StatusCode, resp.Header.Get(console.ReasonHeader))
	}
	for _, path := range []string{"/queue", "/servers", "/tenant", "/tools/" + toolID} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("GET %s: %v", path, err)
		}
		readAll(t, resp)
		cancel()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(console.ReasonHeader) != console.ReasonUnavailable {
			t.Errorf("GET %s with the registry down: %d %q", path, resp.StatusCode, resp.Header.Get(console.ReasonHeader))
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("GET %s took %v, past the 2 s call timeout", path, d)
		}
	}
}
