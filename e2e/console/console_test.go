package console

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/e2e/inventory"
	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	"github.com/toolcrib/toolcrib/e2e/stack"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/condition"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/console"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/registry/reason"
)

const (
	serverID = "inventory"
	tenantA  = "tenant-a"
	tenantB  = "tenant-b"
	classA   = "tenant-a.readers"
	tourTool = "shipment.status"
	toolID   = serverID + "." + tourTool
	// The README tour's change, then a second one made while the reviewer
	// has the first on screen.
	tourDescription   = "Query the status of a shipment and try to repair it."
	secondDescription = "Query the status of a shipment, try to repair it, then cancel it."
	// screenshotsEnv, set to 1, makes the test write its screenshots to
	// docs/console (committed; ordinary runs leave them alone).
	screenshotsEnv = "TOOLCRIB_CONSOLE_SCREENSHOTS"
)

// chromium finds Debian's chromium; the test skips, saying so, without it.
func chromium(t *testing.T) string {
	for _, p := range []string{os.Getenv("TOOLCRIB_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Skip("chromium is not installed (apt-get install chromium; .ci/run installs it): the console's browser test needs it")
	return ""
}

// repoRoot is the repository's root directory.
func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// axeSource is axe-core as npm installed it (tools/console, npm ci).
func axeSource(t *testing.T) string {
	p := filepath.Join(repoRoot(t), "tools", "console", "node_modules", "axe-core", "axe.min.js")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("axe-core is missing (%v): run `npm ci --prefix tools/console` (make test and .ci/run do)", err)
	}
	return string(b)
}

// world is the suite the console runs against: the README tour's server
// reviewed once, then changed at the source and scanned again, so that
// its new digest awaits review.
type world struct {
	st       *stack.Stack
	adminURL string
	base     string
}

func startWorld(t *testing.T, ctx context.Context) *world {
	return startWorldWith(t, ctx, nil, nil)
}

// startWorldWith is startWorld with the services' identity provider auth
// (nil: a new servicetest.NewAuth) and edit applied to the console's
// configuration (nil: none).
func startWorldWith(t *testing.T, ctx context.Context, auth *servicetest.Auth, edit func(*console.Config)) *world {
	st := stack.Start(t, stack.Options{Auth: auth, Discovery: func(c *discovery.Config) { c.Linger = 0 }})
	admAddr := leaseworld.StartAdmission(t, st, time.Minute, stack.AdmissionDB(t), nil)

	sctx, cancel := context.WithCancel(context.Background())
	urls := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- inventory.Serve(sctx, inventory.Config{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", PageSize: 2,
			CursorKey: []byte("console test cursor key, 16+ b")}, slog.New(slog.DiscardHandler), func(m, a string) { urls <- [2]string{m, a} })
	}()
	t.Cleanup(func() { cancel(); <-done })
	var mcpURL, adminURL string
	select {
	case u := <-urls:
		mcpURL, adminURL = u[0], u[1]
	case err := <-done:
		t.Fatalf("example server: %v", err)
	}

	reg := st.Registry
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(reg.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: serverID, Owner: tenantA + "/group:inventory-team",
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: mcpURL}},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		ScanInterval:   durationpb.New(time.Hour),
	}}))
	for _, tn := range []string{tenantA, tenantB} {
		must(reg.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tn}}))
	}
	must(reg.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: classA, TenantId: tenantA, Servers: []*registryv1.AudienceServer{{ServerId: serverID}}}}))
	must(reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantA, Group: "readers",
		Scopes: []string{"inventory:read"}, AudienceClasses: []string{classA}}))
	// A conditional grant: the tenant page shows its condition (as text,
	// escaped: it has quotes and an ampersand pair).
	must(reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantA, Group: "auditors",
		Scopes: []string{"inventory:read"}, AudienceClasses: []string{classA}, Condition: condition.RunExample + ` && request.mode == "AUTONOMOUS"`}))
	scan := func(minGen int64) {
		t.Helper()
		must(st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: classA}))
		servicetest.Eventually(t, 30*time.Second, "a new generation", func() bool {
			a, err := st.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: classA})
			return err == nil && a.GetPointer().GetGeneration() >= minGen
		})
	}
	scan(1)
	servicetest.Eventually(t, 30*time.Second, "the registry learns the tool", func() bool {
		_, err := reg.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
		return err == nil
	})
	pub, err := reg.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: toolID, Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "inventory:read",
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT}})
	if err != nil {
		t.Fatal(err)
	}
	must(reg.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: pub.GetTool().GetApprovalDigest()}))
	must(reg.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: toolID}))

	w := &world{st: st, adminURL: adminURL}
	w.changeDescription(t, ctx, tourDescription, 2)
	cfg := st.ConsoleConfig(t, admAddr)
	if edit != nil {
		edit(&cfg)
	}
	w.base = st.StartConsole(t, cfg)
	return w
}

// changeDescription changes the tour tool's description at the source,
// scans, and waits until the registry's variant has the new digest,
// unreviewed; it returns that approval digest.
func (w *world) changeDescription(t *testing.T, ctx context.Context, desc string, gen int64) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, w.adminURL+"/tools/"+tourTool+"/description", strings.NewReader(desc))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("change at the source: %v %v", err, resp)
	}
	resp.Body.Close()
	if _, err := w.st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: classA}); err != nil {
		t.Fatal(err)
	}
	var digest string
	servicetest.Eventually(t, 30*time.Second, "the changed tool unreviewed in the registry", func() bool {
		got, err := w.st.Registry.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
		if err != nil || len(got.GetTool().GetVariants()) != 1 {
			return false
		}
		v := got.GetTool().GetVariants()[0]
		digest = v.GetApprovalDigest()
		return v.GetGeneration() >= gen && v.GetReviewState() == registryv1.ReviewState_REVIEW_STATE_UNREVIEWED &&
			strings.Contains(string(v.GetDescriptorRaw()), desc)
	})
	return digest
}

// screenshotPages are the pages whose screenshots docs/console keeps.
var screenshotPages = []string{"queue", "review-diff", "review-stale", "tool"}

// browser is one Chromium tab with its own cookies.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	axe   string
	shots string
}

// newBrowser starts a Chromium of its own (its own profile and cookies)
// for one user.
func newBrowser(t *testing.T, exe, base, axe string) *browser {
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1280, 800), chromedp.Flag("disable-dev-shm-usage", true))...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	// Start the browser on this long-lived context: the first Run's
	// context owns the browser, and the per-step timeouts below would
	// close it.
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b := &browser{t: t, ctx: ctx, base: base, axe: axe}
	if os.Getenv(screenshotsEnv) == "1" {
		b.shots = filepath.Join(repoRoot(t), "docs", "console")
	}
	return b
}

func (b *browser) run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.run("read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

// joined is the text of every element sel matches, joined by "|".
func (b *browser) joined(sel string) string {
	b.t.Helper()
	var s string
	b.run("read "+sel, chromedp.Evaluate(`Array.from(document.querySelectorAll(`+jsString(sel)+`)).map(e => e.textContent).join('|')`, &s))
	return s
}

func (b *browser) exists(sel string) bool {
	b.t.Helper()
	var n int
	b.run("count "+sel, chromedp.Evaluate(`document.querySelectorAll(`+jsString(sel)+`).length`, &n))
	return n > 0
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// signIn signs in with a dev token using the keyboard only: focus the
// field, type, Tab to the button, Enter.
func (b *browser) signIn(token string) {
	b.t.Helper()
	b.run("sign in", chromedp.Navigate(b.base+"/signin"), chromedp.WaitVisible("#token", chromedp.ByQuery),
		chromedp.Focus("#token", chromedp.ByQuery), chromedp.SetValue("#token", token, chromedp.ByQuery), markPage,
		chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Enter), newPage)
	var loc string
	b.run("location", chromedp.Location(&loc))
	if !strings.HasSuffix(loc, "/queue") {
		b.t.Fatalf("after sign-in at %s (%q)", loc, b.text("main"))
	}
}

func (b *browser) open(path string) {
	b.t.Helper()
	b.run("open "+path, chromedp.Navigate(b.base+path), chromedp.WaitVisible("main h1", chromedp.ByQuery))
}

// press focuses sel and presses Enter: every action works without a mouse.
func (b *browser) press(sel string) {
	b.t.Helper()
	b.run("press "+sel, chromedp.Focus(sel, chromedp.ByQuery), markPage, chromedp.KeyEvent(kb.Enter), newPage)
}

// tabPress moves the keyboard focus from the top of the page to sel with
// Tab alone (at most max presses), checks that the focused element shows
// its focus ring (:focus-visible with an outline), and presses Enter:
// the control is reachable, and visibly focused, without a mouse.
func (b *browser) tabPress(sel string, max int) {
	b.t.Helper()
	b.run("focus the top", chromedp.Evaluate(`document.activeElement && document.activeElement.blur()`, nil))
	var trail []string
	for range max {
		var at struct {
			Match, Visible bool
			Desc           string
		}
		b.run("tab", chromedp.KeyEvent(kb.Tab), chromedp.Evaluate(`(() => { const e = document.activeElement;
			const s = getComputedStyle(e);
			return {Match: e.matches(`+jsString(sel)+`), Visible: e.matches(':focus-visible') && s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2,
				Desc: e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.getAttribute('href') ? '[' + e.getAttribute('href') + ']' : '')}; })()`, &at))
		trail = append(trail, at.Desc)
		if at.Desc == "body" {
			b.t.Fatalf("Tab went through the page without reaching %s (trail %q)", sel, trail)
		}
		if !at.Visible {
			b.t.Fatalf("tabbing to %s: %s has focus but shows no focus ring (trail %q)", sel, at.Desc, trail)
		}
		if at.Match {
			b.run("press "+sel, markPage, chromedp.KeyEvent(kb.Enter), newPage)
			return
		}
	}
	b.t.Fatalf("%s is not reached by %d Tab presses from the top (trail %q)", sel, max, trail)
}

// markPage marks the current document; newPage waits for a document
// without the mark (the one the form or link loaded), fully loaded.
var (
	markPage = chromedp.Evaluate(`window.__consoleTestOld = true`, nil)
	newPage  = chromedp.ActionFunc(func(ctx context.Context) error {
		for {
			var done bool
			// Errors are expected while the old document goes away.
			err := chromedp.Evaluate(`window.__consoleTestOld === undefined && document.readyState === 'complete' && !!document.querySelector('main h1')`, &done).Do(ctx)
			if err == nil && done {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
)

// axeViolation is one rule axe-core reports broken.
type axeViolation struct {
	ID, Impact, Help, Target string
	Nodes                    int
}

// check runs axe-core in the page at both sizes and fails on a serious
// or critical violation; it also fails when the page scrolls sideways at
// 390 px (unreadable on a phone), and writes screenshots when asked.
func (b *browser) check(name string) {
	b.t.Helper()
	b.run("inject axe", chromedp.Evaluate(b.axe, nil))
	for _, size := range [][2]int64{{1280, 800}, {390, 844}} {
		b.run("viewport", chromedp.EmulateViewport(size[0], size[1]))
		var vs []axeViolation
		b.run("axe "+name, chromedp.Evaluate(`axe.run(document, {resultTypes: ['violations']}).then(r =>
			r.violations.map(v => ({ID: v.id, Impact: v.impact || '', Help: v.help, Nodes: v.nodes.length,
				Target: v.nodes.length ? v.nodes[0].target.join(' ') : ''})))`, &vs,
			func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) }))
		for _, v := range vs {
			if v.Impact == "serious" || v.Impact == "critical" {
				b.t.Errorf("%s at %dx%d: axe %s (%s): %s, %d nodes, first %s", name, size[0], size[1], v.ID, v.Impact, v.Help, v.Nodes, v.Target)
			}
		}
		var overflow bool
		b.run("overflow", chromedp.Evaluate(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow))
		if overflow {
			b.t.Errorf("%s at %dx%d scrolls sideways", name, size[0], size[1])
		}
		if b.shots != "" && slices.Contains(screenshotPages, name) {
			var png []byte
			b.run("screenshot", chromedp.FullScreenshot(&png, 100))
			if err := os.MkdirAll(b.shots, 0o755); err != nil {
				b.t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(b.shots, name+"-"+itoa(size[0])+".png"), png, 0o644); err != nil {
				b.t.Fatal(err)
			}
		}
	}
	b.run("viewport", chromedp.EmulateViewport(1280, 800))
}

func itoa(n int64) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(n)) }

func fmtInt(n int64) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for n > 0 {
		d = append([]byte{byte('0' + n%10)}, d...)
		n /= 10
	}
	return string(d)
}

// session returns the browser's session cookie and the page's CSRF token
// (from the sign-out form), for requests made outside the browser.
func (b *browser) session() (cookie *http.Cookie, csrf string) {
	b.t.Helper()
	var cookies []*network.Cookie
	b.run("cookies", chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().WithURLs([]string{b.base}).Do(ctx)
		return err
	}))
	for _, c := range cookies {
		if c.Name == "toolcrib-console" {
			cookie = &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	if cookie == nil {
		b.t.Fatal("no session cookie")
	}
	b.run("csrf", chromedp.Value(`form[action="/signout"] input[name="csrf"]`, &csrf, chromedp.ByQuery))
	return cookie, csrf
}

// post sends a form the way a page of another site (or a script) would,
// with the browser's session cookie; it returns the status and the
// console's reason header.
func post(t *testing.T, base, path string, cookie *http.Cookie, form url.Values, origin string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get(console.ReasonHeader)
}

// devSignIn posts the dev sign-in form outside the browser: with the
// sign-in page's cookie and token (withPage) or without them.
func devSignIn(t *testing.T, base, token string, withPage bool) (int, string) {
	t.Helper()
	form := url.Values{"token": {token}}
	var cookie *http.Cookie
	if withPage {
		resp, err := http.Get(base + "/signin")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == "toolcrib-console-signin" {
				cookie = c
			}
		}
		const marker = `name="csrf" value="`
		i := bytes.Index(body, []byte(marker))
		if cookie == nil || i < 0 {
			t.Fatal("the sign-in page has no CSRF cookie or field")
		}
		rest := body[i+len(marker):]
		form.Set("csrf", string(rest[:bytes.IndexByte(rest, '"')]))
	}
	return post(t, base, "/signin/dev", cookie, form, "")
}

// TestConsoleReviewInChromium is the "done when", in real
// Chromium against the real registry, discovery and admission.
func TestConsoleReviewInChromium(t *testing.T) {
	if raceEnabled {
		t.Skip("under -race this test takes over a minute: `make test` runs it in its own step without -race")
	}
	exe := chromium(t)
	axe := axeSource(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := startWorld(t, ctx)
	auth := w.st.Auth
	// bob owns the server's tools (inventory-team) and reads them (readers);
	// dave only reads them; carol is in another tenant, in a group of the
	// same name.
	bob := auth.User(t, "bob", tenantA, "inventory-team", "readers")
	dave := auth.User(t, "dave", tenantA, "readers")
	carol := auth.User(t, "carol", tenantB, "inventory-team", "readers")

	// The security headers and cookie flags, as the browser gets them.
	resp, err := http.Get(w.base + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Content-Security-Policy"); got != console.ContentSecurityPolicy {
		t.Errorf("CSP %q", got)
	}
	if sc := resp.Header.Get("Set-Cookie"); !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
		t.Errorf("sign-in cookie %q", sc)
	}

	// Hostile sign-ins are refused with their reason, before any session:
	// a token of another issuer's key, a megabyte of form, and a form
	// without the sign-in page's CSRF cookie.
	stranger := servicetest.NewAuth(t).User(t, "bob", tenantA, "inventory-team")
	if code, r := devSignIn(t, w.base, stranger, true); code != http.StatusUnauthorized || r != console.ReasonTokenInvalid {
		t.Errorf("a token of another key: %d %q", code, r)
	}
	if code, r := devSignIn(t, w.base, strings.Repeat("A", 1<<20), true); code != http.StatusBadRequest || r != console.ReasonBadForm {
		t.Errorf("a megabyte token: %d %q", code, r)
	}
	if code, r := devSignIn(t, w.base, bob, false); code != http.StatusForbidden || r != console.ReasonCSRF {
		t.Errorf("a sign-in without the page's CSRF cookie: %d %q", code, r)
	}

	// bob signs in; the queue lists the tour's tool.
	b := newBrowser(t, exe, w.base, axe)
	b.open("/signin")
	b.check("signin-page")
	b.signIn(bob)
	if q := b.text("main"); !strings.Contains(q, toolID) || !strings.Contains(q, "enabled: calls at this digest are refused") {
		t.Fatalf("bob's queue: %q", q)
	}
	b.check("queue")

	// The review: the tour's description change as a text diff.
	// The keyboard alone: the first Tab reaches the skip link, which
	// moves the focus to the page's content.
	var skipFirst bool
	var focused string
	b.run("skip link", chromedp.Evaluate(`document.activeElement && document.activeElement.blur()`, nil), chromedp.KeyEvent(kb.Tab),
		chromedp.Evaluate(`document.activeElement.matches('a.skip') && document.activeElement.getBoundingClientRect().left >= 0`, &skipFirst),
		chromedp.KeyEvent(kb.Enter), chromedp.Evaluate(`document.activeElement.id`, &focused))
	if !skipFirst || focused != "main" {
		t.Fatalf("the first Tab reaches a visible skip link: %v; Enter on it focuses %q, want main", skipFirst, focused)
	}
	b.tabPress(`a[href="/tools/`+toolID+`/review"]`, 20)
	if got := b.text("#desc-new-0"); got != tourDescription {
		t.Fatalf("the new description reads %q", got)
	}
	if got := b.text("#desc-old-0"); got != "Read the status of one shipment and when it last changed." {
		t.Fatalf("the approved description reads %q", got)
	}
	if got := b.joined("#desc-new-0 ins"); got != "Query|a|try to repair it." {
		t.Fatalf("inserted words %q", got)
	}
	if got := b.joined("#desc-old-0 del"); got != "Read|one|when it last changed." {
		t.Fatalf("deleted words %q", got)
	}
	b.check("review-diff")
	var shown string
	b.run("digest shown", chromedp.Value(`form.approve input[name="approval_digest"]`, &shown, chromedp.ByQuery))

	// The source changes again while bob has the page open: approving the
	// digest shown is refused, nothing is approved, and the new diff is shown.
	newer := w.changeDescription(t, ctx, secondDescription, 3)
	if newer == shown {
		t.Fatal("the second change kept the approval digest")
	}
	b.press("#approve-0")
	if got := b.text("#reason"); got != reason.ApprovalDigestStale {
		t.Fatalf("approving a stale digest: reason %q, page %q", got, b.text("main"))
	}
	if got := b.text("#desc-new-0"); got != secondDescription {
		t.Fatalf("the new diff shows %q", got)
	}
	var offered string
	b.run("digest offered", chromedp.Value(`form.approve input[name="approval_digest"]`, &offered, chromedp.ByQuery))
	if offered != newer {
		t.Fatalf("the refreshed page offers %s, want %s", offered, newer)
	}
	b.check("review-stale")

	// Before bob approves: the CSRF-less POST and the cross-origin POST are
	// refused, and nothing is approved by them.
	cookie, csrf := b.session()
	if code, r := post(t, w.base, "/tools/"+toolID+"/approve", cookie, url.Values{"approval_digest": {newer}}, ""); code != http.StatusForbidden || r != console.ReasonCSRF {
		t.Fatalf("POST without a CSRF token: %d %q", code, r)
	}
	if code, r := post(t, w.base, "/tools/"+toolID+"/approve", cookie, url.Values{"approval_digest": {newer}, "csrf": {"x" + csrf}}, ""); code != http.StatusForbidden || r != console.ReasonCSRF {
		t.Fatalf("POST with a wrong CSRF token: %d %q", code, r)
	}
	if code, r := post(t, w.base, "/tools/"+toolID+"/approve", cookie, url.Values{"approval_digest": {newer}, "csrf": {csrf}}, "http://evil.example"); code != http.StatusForbidden || r != console.ReasonCSRF {
		t.Fatalf("POST from another origin: %d %q", code, r)
	}
	if code, r := post(t, w.base, "/tools/"+toolID+"/approve", nil, url.Values{"approval_digest": {newer}, "csrf": {csrf}}, ""); code != http.StatusUnauthorized || r != console.ReasonSignedOut {
		t.Fatalf("POST without a session: %d %q", code, r)
	}
	got, err := w.st.Registry.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
	if err != nil || got.GetTool().GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("after refused POSTs the tool is %v (%v)", got.GetTool().GetReviewState(), err)
	}

	// Approve exactly the new digest, with the keyboard (Tab to the button).
	b.tabPress("#approve-0", 40)
	if got := b.text("#review-state"); got != "APPROVED" {
		t.Fatalf("after approving: review state %q (%q)", got, b.text("main"))
	}
	got, err = w.st.Registry.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
	if err != nil || !slices.ContainsFunc(got.GetTool().GetApprovals(), func(a *registryv1.ApprovedVersion) bool {
		return a.GetApprovalDigest() == newer && a.GetApprovedBy() != "" && strings.Contains(a.GetApprovedBy(), "bob")
	}) {
		t.Fatalf("the registry's approvals: %v (%v)", got.GetTool().GetApprovals(), err)
	}
	// Admission allows the tool at the approved digest (bob's own token).
	var decision string
	servicetest.Eventually(t, 30*time.Second, "ALLOW from admission on the tool page", func() bool {
		b.run("check", chromedp.SetValue("#check-args", `{"shipment_id":"SHP-1"}`, chromedp.ByQuery))
		b.press("#check")
		decision = b.text("#decision")
		return strings.Contains(decision, "ALLOW")
	})
	// The tool page counts that ALLOW under recent decisions (once the
	// receipt batch is stored), from bob's own tenant only.
	var allowed string
	servicetest.Eventually(t, 10*time.Second, "the ALLOW counted on the tool page", func() bool {
		b.open("/tools/" + toolID)
		if !b.exists("#count-ALLOW") {
			return false
		}
		allowed = b.text("#count-ALLOW")
		return true
	})
	if scope := b.text("#decision-scope"); allowed != "1" || !strings.Contains(scope, "your tenant's only") {
		t.Fatalf("recent decisions: ALLOW %q, %q; table %q", allowed, scope, b.text("#decision-counts"))
	}
	b.check("tool")
	b.open("/servers")
	if s := b.text("main"); !strings.Contains(s, serverID) || !strings.Contains(s, "SNAPSHOT_PROVEN") && !strings.Contains(s, "ELIGIBLE") {
		t.Errorf("servers page: %q", s)
	}
	b.check("servers")
	b.open("/tenant")
	if s := b.text("main"); !strings.Contains(s, "group readers") || !strings.Contains(s, "inventory:read") ||
		!strings.Contains(s, "group auditors") || !strings.Contains(s, condition.RunExample+` && request.mode == "AUTONOMOUS"`) {
		t.Errorf("tenant page: %q", s)
	}
	b.check("tenant")

	// bob owns the server: he closes its pointer for tenant-a's class from
	// the servers page (a POST without the CSRF token is refused first);
	// the page shows it CLOSED and admission answers SERVER_CLOSED.
	b.open("/servers")
	closeForm := `form.close[action="/servers/` + serverID + `/close"]`
	if !b.exists(closeForm) {
		t.Fatalf("bob, the owner, has no close button: %q", b.text("main"))
	}
	var expected string
	b.run("expected generation", chromedp.Value(closeForm+` input[name="expected_generation"]`, &expected, chromedp.ByQuery))
	if code, r := post(t, w.base, "/servers/"+serverID+"/close", cookie, url.Values{"class": {classA}, "expected_generation": {expected},
		"reason": {"no csrf"}}, ""); code != http.StatusForbidden || r != console.ReasonCSRF {
		t.Fatalf("close POST without a CSRF token: %d %q", code, r)
	}
	b.run("close reason", chromedp.SetValue(closeForm+` input[name="reason"]`, "the upstream leaks data", chromedp.ByQuery))
	b.press(closeForm + " button")
	if got := b.text(`[id="pointer-` + serverID + `-` + classA + `"]`); !strings.Contains(got, "CLOSED") || b.exists(closeForm) {
		t.Fatalf("after closing: %q (%q)", got, b.text("main"))
	}
	ptr, err := w.st.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: classA})
	if err != nil || ptr.GetPointer().GetState() != discoveryv1.PointerState_POINTER_STATE_CLOSED || strconv.FormatInt(ptr.GetPointer().GetGeneration(), 10) != expected {
		t.Fatalf("discovery's pointer after the close: %v %v", ptr.GetPointer(), err)
	}
	b.open("/tools/" + toolID)
	servicetest.Eventually(t, 30*time.Second, "SERVER_CLOSED from admission on the tool page", func() bool {
		b.run("check", chromedp.SetValue("#check-args", `{"shipment_id":"SHP-1"}`, chromedp.ByQuery))
		b.press("#check")
		decision = b.text("#decision")
		return strings.Contains(decision, "SERVER_CLOSED")
	})

	// The owner publishes the same contract allowing sampling (a new
	// approval digest): the review shows exactly that row changed, from
	// "refused" (approved) to "allowed".
	if _, err := w.st.Registry.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: toolID, Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "inventory:read",
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT, AllowSampling: true}}); err != nil {
		t.Fatal(err)
	}
	b.open("/tools/" + toolID + "/review")
	if got := b.joined("tr.changed th, tr.changed td"); got != "sampling|refused|allowed: the server may ask the caller's model through the gateway|changed" {
		t.Fatalf("the contract rows changed by allow_sampling: %q (%q)", got, b.text("main"))
	}
	b.check("review-sampling")

	// Sign-out ends the session: its cookie is refused afterwards.
	b.press(`form[action="/signout"] button`)
	if code, r := post(t, w.base, "/tools/"+toolID+"/enable", cookie, url.Values{"csrf": {csrf}}, ""); code != http.StatusUnauthorized || r != console.ReasonSignedOut {
		t.Fatalf("the signed-out cookie: %d %q", code, r)
	}

	// dave (tenant-a, not an owner) reads the next change but cannot
	// approve it: no button, and the POST is refused by the registry.
	third := w.changeDescription(t, ctx, tourDescription+" Now.", 4)
	// The same browser, signed in as another user: nothing of bob's session
	// is left.
	d := b
	d.signIn(dave)
	if d.exists(`a[href="/tools/` + toolID + `/review"]`) {
		t.Fatal("dave's queue lists a tool he does not own")
	}
	d.open("/tools/" + toolID + "/review")
	if d.exists("#approve-0") || !d.exists("#no-approve-0") {
		t.Fatal("dave is offered the approve button")
	}
	dc, dcsrf := d.session()
	if code, r := post(t, w.base, "/tools/"+toolID+"/approve", dc, url.Values{"approval_digest": {third}, "csrf": {dcsrf}}, ""); code != http.StatusForbidden || r != "PERMISSION_DENIED" {
		t.Fatalf("dave's approve POST: %d %q", code, r)
	}
	// Nor close the server: no button, and discovery refuses the POST.
	d.open("/servers")
	if d.exists(`form.close`) {
		t.Fatal("dave is offered the close button")
	}
	if code, r := post(t, w.base, "/servers/"+serverID+"/close", dc, url.Values{"class": {classA}, "expected_generation": {"4"},
		"reason": {"not mine"}, "csrf": {dcsrf}}, ""); code != http.StatusForbidden || r != "PERMISSION_DENIED" {
		t.Fatalf("dave's close POST: %d %q", code, r)
	}

	// carol (tenant-b) sees none of it: an empty queue, no server, and the
	// tool does not exist for her.
	d.press(`form[action="/signout"] button`)
	c := b
	c.signIn(carol)
	if !c.exists("#queue-empty") || strings.Contains(c.text("main"), toolID) {
		t.Fatalf("carol's queue: %q", c.text("main"))
	}
	c.open("/tools/" + toolID + "/review")
	if got := c.text("#reason"); got != "NOT_FOUND" {
		t.Fatalf("carol opening the tool: %q", got)
	}
	c.open("/servers")
	if strings.Contains(c.text("main"), serverID+"\n") || c.exists(`#srv-`+serverID) {
		t.Fatalf("carol's servers page lists %s", serverID)
	}
	cc, ccsrf := c.session()
	// Her approve POST: the tool does not exist for her.
	if code, r := post(t, w.base, "/tools/"+toolID+"/approve", cc, url.Values{"approval_digest": {third}, "csrf": {ccsrf}}, ""); code != http.StatusNotFound || r != "NOT_FOUND" {
		t.Fatalf("carol's approve POST: %d %q", code, r)
	}
	// Neither refused POST approved anything.
	got, err = w.st.Registry.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
	if err != nil || got.GetTool().GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("after dave's and carol's POSTs the tool is %v (%v)", got.GetTool().GetReviewState(), err)
	}
}
