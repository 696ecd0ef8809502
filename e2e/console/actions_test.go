package console

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// httpSignIn signs in with a dev token as a script would: the sign-in
// page's cookie and CSRF token, then the form. It returns the session
// cookie and the session's CSRF token, read from the queue page's
// sign-out form.
func httpSignIn(t *testing.T, base, token string) (*http.Cookie, string) {
	t.Helper()
	resp, err := http.Get(base + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var pre *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "toolcrib-console-signin" {
			pre = c
		}
	}
	csrf := formCSRF(t, body)
	if pre == nil {
		t.Fatal("the sign-in page set no CSRF cookie")
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/signin/dev", strings.NewReader(url.Values{"token": {token}, "csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.AddCookie(pre)
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "toolcrib-console" && c.Value != "" {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("dev sign-in: HTTP %d, no session cookie", resp.StatusCode)
	}
	code, page := get(t, base, "/queue", session)
	if code != http.StatusOK {
		t.Fatalf("the queue after signing in: HTTP %d", code)
	}
	return session, formCSRF(t, []byte(page))
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// formCSRF is the CSRF token of the first form of page.
func formCSRF(t *testing.T, page []byte) string {
	t.Helper()
	const marker = `name="csrf" value="`
	i := bytes.Index(page, []byte(marker))
	if i < 0 {
		t.Fatal("the page has no CSRF field")
	}
	rest := page[i+len(marker):]
	return string(rest[:bytes.IndexByte(rest, '"')])
}

// get fetches path with cookie; it returns the status and the body.
func get(t *testing.T, base, path string, cookie *http.Cookie) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.AddCookie(cookie)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConsoleActionsThroughTheServices: every action of the tool, servers
// and tenant pages, sent as the page's form with a signed-in user's cookie
// and CSRF token, does what it says in the real registry and discovery,
// with that user's own token, and only what that token allows. bob (the
// tool's and the server's owner) disables and enables the tool and rolls
// back to its approved contract; dave (a reader of the same tenant) is
// offered none of those buttons and is refused each POST by the registry,
// nothing changing. A platform admin rescans the server and rolls its
// pointer back (discovery's rule: bob and dave are offered neither and are
// refused both), and revokes a group's scope from the tenant page (the
// grant no longer holds it, the epoch moves), which bob is refused.
func TestConsoleActionsThroughTheServices(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := startWorld(t, ctx)
	auth, reg := w.st.Auth, w.st.Registry
	bob, bcsrf := httpSignIn(t, w.base, auth.User(t, "bob", tenantA, "inventory-team", "readers"))
	dave, dcsrf := httpSignIn(t, w.base, auth.User(t, "dave", tenantA, "readers"))
	admin, acsrf := httpSignIn(t, w.base, auth.Admin(t))
	form := func(csrf string, kv ...string) url.Values {
		v := url.Values{"csrf": {csrf}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	send := func(who *http.Cookie, path string, f url.Values) (int, string) {
		t.Helper()
		return post(t, w.base, path, who, f, w.base)
	}
	tool := func() *registryv1.Tool {
		t.Helper()
		got, err := reg.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetTool()
	}

	// The tool page offers the owner its actions, and the reader none.
	_, page := get(t, w.base, "/tools/"+toolID, bob)
	for _, action := range []string{"disable", "rollback"} {
		if !strings.Contains(page, `action="/tools/`+toolID+`/`+action+`"`) {
			t.Fatalf("bob's tool page has no %s form", action)
		}
	}
	_, page = get(t, w.base, "/tools/"+toolID, dave)
	for _, action := range []string{"enable", "disable", "rollback"} {
		if strings.Contains(page, `action="/tools/`+toolID+`/`+action+`"`) {
			t.Fatalf("dave's tool page offers %s", action)
		}
	}

	// Disable and enable: the registry's kill switch, with bob's token.
	for _, step := range []struct {
		action string
		want   bool
	}{{"disable", false}, {"enable", true}} {
		if code, r := send(dave, "/tools/"+toolID+"/"+step.action, form(dcsrf, "reason", "dave tries")); code != http.StatusForbidden {
			t.Fatalf("dave's %s: HTTP %d %q", step.action, code, r)
		}
		if tool().GetEnabled() == step.want {
			t.Fatalf("dave's refused %s changed the tool", step.action)
		}
		if code, r := send(bob, "/tools/"+toolID+"/"+step.action, form(bcsrf, "reason", "console test")); code != http.StatusSeeOther {
			t.Fatalf("bob's %s: HTTP %d %q", step.action, code, r)
		}
		if tool().GetEnabled() != step.want {
			t.Fatalf("after bob's %s the tool is enabled=%v", step.action, tool().GetEnabled())
		}
	}

	// The tool page: per audience class its variant, rollout stage, shadow
	// comparison (generation 2 against 1: the tour's description changed)
	// and guard actions, and the history holding bob's disable and enable.
	_, page = get(t, w.base, "/tools/"+toolID, bob)
	for _, want := range []string{classA, "Rollout stage", "FULL", "Shadow comparison", "vs 1: 1 changed", "Guard actions", "History", "console test"} {
		if !strings.Contains(page, want) {
			t.Fatalf("bob's tool page lacks %q", want)
		}
	}
	if n := strings.Count(page, "bob"); n < 2 {
		t.Fatalf("the tool's history names bob %d times, want his disable and enable", n)
	}

	// Rollback: a contract allowing sampling is published (not approved);
	// rolling back makes the approved one current again.
	if _, err := reg.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: toolID, Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "inventory:read", AllowSampling: true,
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT}}); err != nil {
		t.Fatal(err)
	}
	if !tool().GetContract().GetAllowSampling() {
		t.Fatal("the published contract is not current")
	}
	if code, r := send(dave, "/tools/"+toolID+"/rollback", form(dcsrf)); code != http.StatusForbidden {
		t.Fatalf("dave's rollback: HTTP %d %q", code, r)
	}
	if code, r := send(bob, "/tools/"+toolID+"/rollback", form(bcsrf, "reason", "not reviewed")); code != http.StatusSeeOther {
		t.Fatalf("bob's rollback: HTTP %d %q", code, r)
	}
	if tool().GetContract().GetAllowSampling() {
		t.Fatal("after bob's rollback the unapproved contract is still current")
	}

	// Rescan and the pointer's rollback are a platform admin's (discovery's
	// rule): offered to the admin only, and bob's and dave's POSTs refused.
	_, page = get(t, w.base, "/servers", admin)
	for _, action := range []string{"rescan", "rollback"} {
		if !strings.Contains(page, `action="/servers/`+serverID+`/`+action+`"`) {
			t.Fatalf("the admin's servers page has no %s form", action)
		}
	}
	_, page = get(t, w.base, "/servers", bob)
	for _, action := range []string{"rescan", "rollback"} {
		if strings.Contains(page, `action="/servers/`+serverID+`/`+action+`"`) {
			t.Fatalf("bob's servers page offers %s", action)
		}
	}
	scans := func() int {
		t.Helper()
		resp, err := w.st.Discovery.ListRuns(ctx, &discoveryv1.ListRunsRequest{ServerId: serverID, PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.GetRuns())
	}
	before := scans()
	for _, who := range []struct {
		name   string
		cookie *http.Cookie
		csrf   string
	}{{"dave", dave, dcsrf}, {"bob", bob, bcsrf}} {
		if code, r := send(who.cookie, "/servers/"+serverID+"/rescan", form(who.csrf)); code != http.StatusForbidden {
			t.Fatalf("%s's rescan: HTTP %d %q", who.name, code, r)
		}
	}
	if n := scans(); n != before {
		t.Fatalf("refused rescans started %d scans", n-before)
	}
	if code, r := send(admin, "/servers/"+serverID+"/rescan", form(acsrf)); code != http.StatusSeeOther {
		t.Fatalf("the admin's rescan: HTTP %d %q", code, r)
	}
	servicetest.Eventually(t, 30*time.Second, "the console's rescan", func() bool { return scans() > before })
	// The servers page lists the scans with their final state: read once
	// every run has one (the rescan's run, read DISCOVERING a moment
	// before the page, could end before the page is rendered).
	var runs *discoveryv1.ListRunsResponse
	servicetest.Eventually(t, 30*time.Second, "the console's rescan to finish", func() bool {
		var err error
		runs, err = w.st.Discovery.ListRuns(ctx, &discoveryv1.ListRunsRequest{ServerId: serverID, PageSize: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs.GetRuns() {
			if r.GetFinishedAt() == nil {
				return false
			}
		}
		return len(runs.GetRuns()) > 0
	})
	_, page = get(t, w.base, "/servers", admin)
	for _, r := range runs.GetRuns() {
		if state := strings.TrimPrefix(r.GetState().String(), "DISCOVERY_STATE_"); !strings.Contains(page, "<th scope=\"row\">"+state+"</th>") {
			t.Fatalf("the servers page does not show a scan's final state %s", state)
		}
	}

	// Pointer rollback: from generation 2 (the changed description) back to
	// generation 1 (bob and dave refused; a stale expected generation
	// refused).
	active := func() int64 {
		t.Helper()
		a, err := w.st.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: classA})
		if err != nil {
			t.Fatal(err)
		}
		return a.GetPointer().GetGeneration()
	}
	servicetest.Eventually(t, 30*time.Second, "the rescan settled", func() bool { return active() >= 2 })
	gen := active()
	rb := func(who *http.Cookie, csrf string, expected int64) (int, string) {
		return send(who, "/servers/"+serverID+"/rollback", form(csrf, "class", classA, "expected_generation", strconv.FormatInt(expected, 10), "reason", "console test"))
	}
	if code, r := rb(dave, dcsrf, gen); code != http.StatusForbidden {
		t.Fatalf("dave's pointer rollback: HTTP %d %q", code, r)
	}
	if code, r := rb(bob, bcsrf, gen); code != http.StatusForbidden {
		t.Fatalf("bob's pointer rollback: HTTP %d %q", code, r)
	}
	if code, r := rb(admin, acsrf, gen+5); code != http.StatusConflict {
		t.Fatalf("a pointer rollback at a stale generation: HTTP %d %q", code, r)
	}
	if active() != gen {
		t.Fatal("a refused pointer rollback moved the pointer")
	}
	if code, r := rb(admin, acsrf, gen); code != http.StatusSeeOther {
		t.Fatalf("the admin's pointer rollback: HTTP %d %q", code, r)
	}
	if got := active(); got >= gen {
		t.Fatalf("after the admin's pointer rollback the active generation is %d (was %d)", got, gen)
	}

	// Revoke from the tenant page: the auditors' scope, by the platform
	// admin; bob is refused.
	policy := func() *registryv1.GetPolicyResponse {
		t.Helper()
		p, err := reg.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenantA})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	hasAuditors := func(p *registryv1.GetPolicyResponse) bool {
		return slices.ContainsFunc(p.GetPolicy().GetGrants(), func(g *registryv1.Grant) bool {
			return g.GetGroup() == "auditors" && slices.Contains(g.GetScopes(), "inventory:read")
		})
	}
	for _, who := range []struct {
		name    string
		cookie  *http.Cookie
		offered bool
	}{{"the admin", admin, true}, {"bob", bob, false}} {
		_, page := get(t, w.base, "/tenant?tenant="+tenantA, who.cookie)
		if strings.Contains(page, `action="/tenant/revoke"`) != who.offered {
			t.Fatalf("%s's tenant page: revoke offered %v, want %v", who.name, !who.offered, who.offered)
		}
	}
	p0 := policy()
	if !hasAuditors(p0) {
		t.Fatal("the world has no auditors' grant")
	}
	revoke := func(who *http.Cookie, csrf string) (int, string) {
		return send(who, "/tenant/revoke", form(csrf, "tenant", tenantA, "group", "auditors", "scope", "inventory:read"))
	}
	if code, r := revoke(bob, bcsrf); code != http.StatusForbidden {
		t.Fatalf("bob's revoke: HTTP %d %q", code, r)
	}
	if p := policy(); !hasAuditors(p) || p.GetPolicy().GetPolicyEpoch() != p0.GetPolicy().GetPolicyEpoch() {
		t.Fatal("bob's refused revoke changed the policy")
	}
	if code, r := revoke(admin, acsrf); code != http.StatusSeeOther {
		t.Fatalf("the admin's revoke: HTTP %d %q", code, r)
	}
	if p := policy(); hasAuditors(p) || p.GetPolicy().GetPolicyEpoch() <= p0.GetPolicy().GetPolicyEpoch() {
		t.Fatalf("after the admin's revoke: auditors %v, epoch %d (was %d)", hasAuditors(p), p.GetPolicy().GetPolicyEpoch(), p0.GetPolicy().GetPolicyEpoch())
	}

	// The tenant page's epochs: now, at the new epoch, the auditors hold
	// no inventory:read; at the epoch before the revoke they are shown
	// holding it, with no revoke button (the past is read-only).
	auditorsAt := func(epoch int64) (shown int64, scopes string, revoke bool) {
		t.Helper()
		path := "/tenant?tenant=" + tenantA
		if epoch > 0 {
			path += "&epoch=" + strconv.FormatInt(epoch, 10)
		}
		code, page := get(t, w.base, path, admin)
		if code != http.StatusOK {
			t.Fatalf("GET %s: HTTP %d", path, code)
		}
		doc := parsePage(t, page)
		shown, _ = strconv.ParseInt(text(byID(doc, "epoch")), 10, 64)
		for _, tbl := range all(doc, tag("table")) {
			for _, r := range rows(tbl) {
				if r[0] == "group auditors" {
					scopes = r[1]
				}
			}
		}
		return shown, scopes, slices.ContainsFunc(forms(doc), func(f pageForm) bool { return f.Action == "/tenant/revoke" })
	}
	now := policy().GetPolicy().GetPolicyEpoch()
	if e, scopes, revoke := auditorsAt(0); e != now || strings.Contains(scopes, "inventory:read") || !revoke {
		t.Fatalf("the tenant page now: epoch %d (want %d), the auditors' scopes %q, revoke offered %v", e, now, scopes, revoke)
	}
	prior := p0.GetPolicy().GetPolicyEpoch()
	if e, scopes, revoke := auditorsAt(prior); e != prior || scopes != "inventory:read" || revoke {
		t.Fatalf("the tenant page at epoch %d: epoch %d, the auditors' scopes %q, revoke offered %v", prior, e, scopes, revoke)
	}
}
