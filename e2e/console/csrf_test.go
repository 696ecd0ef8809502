package console

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/console"
)

// TestConsoleEveryFormCarriesTheSessionsCSRFToken: every form that posts,
// on every page a platform admin is shown (the user offered every action),
// carries exactly one `csrf` field holding the session's token; and every
// action refuses its own form sent without that field or with a wrong
// token (403 CSRF_TOKEN_INVALID), each refused form changing nothing in
// the registry, discovery or the session. The same forms sent as served
// are accepted (the check form answers a decision), so the refusals are
// the token's doing.
func TestConsoleEveryFormCarriesTheSessionsCSRFToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := startWorld(t, ctx)
	admin, csrf := httpSignIn(t, w.base, w.st.Auth.Admin(t))

	// The tool awaits review (approve form), is enabled (disable form), and
	// the server's pointer is active (rollback and close forms).
	pages := []string{"/queue", "/tools/" + toolID + "/review", "/tools/" + toolID, "/servers", "/tenant?tenant=" + tenantA}
	posted := map[string]pageForm{}
	for _, p := range pages {
		code, body := get(t, w.base, p, admin)
		if code != http.StatusOK {
			t.Fatalf("GET %s: HTTP %d", p, code)
		}
		for _, f := range forms(parsePage(t, body)) {
			if f.Method != "post" {
				continue
			}
			if got := f.Fields["csrf"]; len(got) != 1 || got[0] != csrf {
				t.Errorf("the form posting to %s on %s carries csrf %q, want exactly the session's token", f.Action, p, got)
			}
			posted[f.Action] = f
		}
	}
	want := []string{"/signout", "/tools/" + toolID + "/approve", "/tools/" + toolID + "/disable", "/tools/" + toolID + "/rollback",
		"/tools/" + toolID + "/check", "/servers/" + serverID + "/rescan", "/servers/" + serverID + "/rollback",
		"/servers/" + serverID + "/close", "/tenant/revoke"}
	if got := slices.Sorted(maps.Keys(posted)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("the admin's pages post to %q, want %q", got, want)
	}
	// Enable has no form while the tool is enabled; its route refuses the
	// same way.
	posted["/tools/"+toolID+"/enable"] = pageForm{Method: "post", Action: "/tools/" + toolID + "/enable", Fields: url.Values{"csrf": {csrf}}}

	// What a refused form could have changed.
	type state struct {
		review   registryv1.ReviewState
		enabled  bool
		contract int64
		pointer  string
		epoch    int64
		runs     int
	}
	snapshot := func() state {
		t.Helper()
		tool, err := w.st.Registry.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
		if err != nil {
			t.Fatal(err)
		}
		ptr, err := w.st.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: classA})
		if err != nil {
			t.Fatal(err)
		}
		pol, err := w.st.Registry.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenantA})
		if err != nil {
			t.Fatal(err)
		}
		runs, err := w.st.Discovery.ListRuns(ctx, &discoveryv1.ListRunsRequest{ServerId: serverID, PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		return state{review: tool.GetTool().GetReviewState(), enabled: tool.GetTool().GetEnabled(), contract: tool.GetTool().GetContractVersion(),
			pointer: fmt.Sprintf("%v@%d", ptr.GetPointer().GetState(), ptr.GetPointer().GetGeneration()),
			epoch:   pol.GetPolicy().GetPolicyEpoch(), runs: len(runs.GetRuns())}
	}
	before := snapshot()
	if before.review != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED || !before.enabled {
		t.Fatalf("the world's tool is %v, enabled %v", before.review, before.enabled)
	}

	for _, action := range slices.Sorted(maps.Keys(posted)) {
		f := posted[action]
		fields := url.Values{}
		for k, v := range f.Fields {
			fields[k] = slices.Clone(v)
		}
		// The fields a user types (a reason) filled as a user would.
		if fields.Has("reason") {
			fields.Set("reason", "csrf test")
		}
		for _, c := range []struct {
			name  string
			token []string
		}{{"without the csrf field", nil}, {"with a wrong token", []string{csrf + "x"}}, {"with an empty token", []string{""}}} {
			fields["csrf"] = c.token
			if c.token == nil {
				fields.Del("csrf")
			}
			if code, r := post(t, w.base, action, admin, fields, w.base); code != http.StatusForbidden || r != console.ReasonCSRF {
				t.Errorf("POST %s %s: HTTP %d %q, want 403 %s", action, c.name, code, r, console.ReasonCSRF)
			}
		}
	}
	if after := snapshot(); after != before {
		t.Fatalf("refused forms changed the world: %+v, was %+v", after, before)
	}
	// The refused sign-out did not end the session.
	if code, _ := get(t, w.base, "/queue", admin); code != http.StatusOK {
		t.Fatalf("after a refused sign-out the session is gone: HTTP %d", code)
	}
	// The check form as served, with its token, is answered.
	if code, r := post(t, w.base, "/tools/"+toolID+"/check", admin, posted["/tools/"+toolID+"/check"].Fields, w.base); code != http.StatusOK {
		t.Fatalf("the check form as served: HTTP %d %q", code, r)
	}
}
