package web

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/registry/reason"
)

// Notices after an action (the `done` query parameter names one; the
// text is never the caller's).
var notices = map[string]string{
	"approved":   "Approved: admission allows calls at exactly this digest from the next policy epoch.",
	"enabled":    "Enabled.",
	"disabled":   "Disabled: admission denies every call with DISABLED.",
	"rolledback": "Rolled back to the last approved version.",
	"rescan":     "Scan queued.",
	"pointer":    "Pointer moved back.",
	"closed":     "Closed: admission answers SERVER_CLOSED for the server's tools in that class, and lease issuance for the server is frozen until an operator resumes it.",
	"revoked":    "Revoked: the tenant's policy epoch moved.",
}

// maxListPages bounds the pages of a list read for one page view.
const maxListPages = 10

// queueEntry is one tool awaiting review.
type queueEntry struct {
	Tool    *registryv1.Tool
	Classes []string
	Why     string
}

func (s *Server) queue(q *req) {
	var awaiting, noContract []queueEntry
	token := ""
	for range maxListPages {
		resp, err := s.o.Registry.ListTools(q.ctx, &registryv1.ListToolsRequest{PageSize: 200, PageToken: token}, q.call)
		if err != nil {
			s.refuse(q, err)
			return
		}
		for _, t := range resp.GetTools() {
			if !canManage(q, t.GetOwner()) {
				continue // the queue is the user's owner groups' (all for admins)
			}
			var unrev, pending []string
			for _, v := range t.GetVariants() {
				switch v.GetReviewState() {
				case registryv1.ReviewState_REVIEW_STATE_UNREVIEWED:
					unrev = append(unrev, v.GetAudienceClass())
				case registryv1.ReviewState_REVIEW_STATE_PENDING_CONTRACT:
					pending = append(pending, v.GetAudienceClass())
				}
			}
			if len(unrev) > 0 {
				why := "not enabled yet"
				if t.GetEnabled() {
					why = "enabled: calls at this digest are refused (UNREVIEWED) until it is approved"
				}
				awaiting = append(awaiting, queueEntry{Tool: t, Classes: unrev, Why: why})
			}
			if len(pending) > 0 {
				noContract = append(noContract, queueEntry{Tool: t, Classes: pending})
			}
		}
		token = resp.GetNextPageToken()
		if token == "" {
			break
		}
	}
	s.render(q.w, q.r, http.StatusOK, "queue", q.page("Review queue", "queue", map[string]any{"Awaiting": awaiting, "NoContract": noContract}))
}

// toolID reads and checks the {id} path value (the one id grammar).
func (s *Server) toolID(q *req) (string, bool) {
	id := q.r.PathValue("id")
	if !ids.ValidToolID(id) {
		s.fail(q.w, q.r, http.StatusBadRequest, ReasonBadForm, "That is not a tool id.")
		return "", false
	}
	return id, true
}

func (s *Server) review(q *req) {
	id, ok := s.toolID(q)
	if !ok {
		return
	}
	s.showReview(q, id, http.StatusOK, nil)
}

func (s *Server) showReview(q *req, id string, code int, pr *problem) {
	resp, err := s.o.Registry.GetTool(q.ctx, &registryv1.GetToolRequest{ToolId: id, IncludeHistory: true}, q.call)
	if err != nil {
		s.refuse(q, err)
		return
	}
	rp := s.buildReview(q.ctx, q.call, resp.GetTool(), resp.GetHistory())
	rp.CanApprove = canManage(q, resp.GetTool().GetOwner())
	pg := q.page("Review "+id, "queue", rp)
	pg.Problem = pr
	s.render(q.w, q.r, code, "review", pg)
}

// approve sends exactly the digest the page showed. A digest that changed
// under the page is refused by the registry (APPROVAL_DIGEST_STALE); the
// console then shows the review again, with the new diff.
func (s *Server) approve(q *req) {
	id, ok := s.toolID(q)
	if !ok {
		return
	}
	digest := q.r.PostForm.Get("approval_digest")
	if !strings.HasPrefix(digest, "sha256:") || len(digest) != len("sha256:")+64 {
		s.fail(q.w, q.r, http.StatusBadRequest, ReasonBadForm, "The approval digest is missing or malformed.")
		return
	}
	_, err := s.o.Registry.ApproveTool(q.ctx, &registryv1.ApproveToolRequest{ToolId: id, ApprovalDigest: digest}, q.call)
	if err != nil {
		code, pr := refusal(err)
		if status.Code(err) == codes.FailedPrecondition && pr.Reason == reason.ApprovalDigestStale {
			pr.Message = "The tool changed after this page was loaded: the digest you approved is no longer current, and nothing was approved. Review the new diff below."
			s.showReview(q, id, code, pr)
			return
		}
		s.refuse(q, err)
		return
	}
	http.Redirect(q.w, q.r, "/tools/"+id+"?done=approved", http.StatusSeeOther)
}

func (s *Server) toolAction(q *req, do func(id string) error, done string) {
	id, ok := s.toolID(q)
	if !ok {
		return
	}
	if err := do(id); err != nil {
		s.refuse(q, err)
		return
	}
	http.Redirect(q.w, q.r, "/tools/"+id+"?done="+done, http.StatusSeeOther)
}

func (s *Server) enable(q *req) {
	s.toolAction(q, func(id string) error {
		_, err := s.o.Registry.EnableTool(q.ctx, &registryv1.EnableToolRequest{ToolId: id}, q.call)
		return err
	}, "enabled")
}

func (s *Server) disable(q *req) {
	s.toolAction(q, func(id string) error {
		_, err := s.o.Registry.DisableTool(q.ctx, &registryv1.DisableToolRequest{ToolId: id, Reason: bounded(q.r.PostForm.Get("reason"), 200)}, q.call)
		return err
	}, "disabled")
}

func (s *Server) rollbackTool(q *req) {
	s.toolAction(q, func(id string) error {
		_, err := s.o.Registry.RollbackTool(q.ctx, &registryv1.RollbackToolRequest{ToolId: id, Reason: bounded(q.r.PostForm.Get("reason"), 200)}, q.call)
		return err
	}, "rolledback")
}

// bounded cuts a free-text field the user typed.
func bounded(s string, n int) string {
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "")
	}
	return strings.TrimSpace(s)
}

// classView is what the tool page shows per audience class.
type classView struct {
	Variant    *registryv1.ToolVariant
	Stage      *registryv1.RolloutStage
	Comparison *discoveryv1.RunComparison
	Guard      []*discoveryv1.GuardAction
	GuardNote  string
	Checks     int64
	NotFound   int64
	Stale      int64
	Decisions  string
}

// checkResult is an admission decision asked from the tool page.
type checkResult struct {
	Class, Decision, Reason, Detail, Receipt string
}

// decisionCounts is the tool page's "recent decisions": admission's
// CountDecisions with the user's token (its own tenant's receipts, every
// tenant's for a platform admin).
type decisionCounts struct {
	Window     string
	Reasons    []*admissionv1.ReasonCount
	Total      int64
	AllTenants bool
	// Note says why there are no counts (admission refused or is down).
	Note string
}

func (s *Server) tool(q *req) {
	id, ok := s.toolID(q)
	if !ok {
		return
	}
	s.showTool(q, id, http.StatusOK, nil)
}

func (s *Server) showTool(q *req, id string, code int, check *checkResult) {
	resp, err := s.o.Registry.GetTool(q.ctx, &registryv1.GetToolRequest{ToolId: id, IncludeHistory: true}, q.call)
	if err != nil {
		s.refuse(q, err)
		return
	}
	t := resp.GetTool()
	var classes []classView
	since := timestamppb.New(time.Now().Add(-24 * time.Hour))
	for _, v := range t.GetVariants() {
		cv := classView{Variant: v}
		if st, err := s.o.Registry.GetRolloutStage(q.ctx, &registryv1.GetRolloutStageRequest{ServerId: t.GetServerId(), AudienceClass: v.GetAudienceClass()}, q.call); err == nil {
			cv.Stage = st.GetRolloutStage()
		}
		if c, err := s.o.Discovery.GetRunComparison(q.ctx, &discoveryv1.GetRunComparisonRequest{ServerId: t.GetServerId(), AudienceClass: v.GetAudienceClass()}, q.call); err == nil {
			cv.Comparison = c.GetComparison()
		}
		g, err := s.o.Discovery.ListGuardActions(q.ctx, &discoveryv1.ListGuardActionsRequest{ServerId: t.GetServerId(), AudienceClass: v.GetAudienceClass(), PageSize: 10}, q.call)
		switch {
		case err == nil:
			cv.Guard = g.GetActions()
		case status.Code(err) == codes.PermissionDenied:
			cv.GuardNote = "Platform admins only."
		default:
			cv.GuardNote = "Discovery did not answer."
		}
		sum, err := s.o.Admission.SummarizeDecisions(q.ctx, &admissionv1.SummarizeDecisionsRequest{ServerId: t.GetServerId(),
			AudienceClass: v.GetAudienceClass(), Generation: v.GetGeneration(), Since: since}, q.call)
		switch {
		case err == nil:
			cv.Checks = sum.GetChecks()
			for _, td := range sum.GetTools() {
				if td.GetToolId() == t.GetToolId() {
					cv.NotFound, cv.Stale = td.GetNotFound(), td.GetStaleCatalog()
				}
			}
		case status.Code(err) == codes.PermissionDenied:
			cv.Decisions = "Platform admins only."
		default:
			cv.Decisions = "Admission did not answer."
		}
		classes = append(classes, cv)
	}
	counts := decisionCounts{Window: "24 h"}
	c, err := s.o.Admission.CountDecisions(q.ctx, &admissionv1.CountDecisionsRequest{ToolId: t.GetToolId(), Since: since}, q.call)
	switch {
	case err == nil:
		counts.Reasons, counts.Total, counts.AllTenants = c.GetReasons(), c.GetTotal(), c.GetAllTenants()
	case status.Code(err) == codes.PermissionDenied:
		counts.Note = "Admission refused your token."
	default:
		counts.Note = "Admission did not answer."
	}
	history := resp.GetHistory()
	if len(history) > 50 {
		history = history[len(history)-50:]
	}
	history = slices.Clone(history)
	slices.Reverse(history)
	pg := q.page(id, "queue", map[string]any{"Tool": t, "Classes": classes, "History": history,
		"CanManage": canManage(q, t.GetOwner()), "Check": check, "Counts": counts})
	pg.Notice = notices[q.r.URL.Query().Get("done")]
	s.render(q.w, q.r, code, "tool", pg)
}

// check asks admission, with the user's token, what it decides for a
// call of the tool as the variant of one class shows it.
func (s *Server) check(q *req) {
	id, ok := s.toolID(q)
	if !ok {
		return
	}
	class := q.r.PostForm.Get("class")
	args := strings.TrimSpace(q.r.PostForm.Get("arguments"))
	if args == "" {
		args = "{}"
	}
	if !json.Valid([]byte(args)) || len(args) > 32<<10 {
		s.fail(q.w, q.r, http.StatusBadRequest, ReasonBadForm, "The arguments must be a JSON object of at most 32 KiB.")
		return
	}
	t, err := s.o.Registry.GetTool(q.ctx, &registryv1.GetToolRequest{ToolId: id}, q.call)
	if err != nil {
		s.refuse(q, err)
		return
	}
	i := slices.IndexFunc(t.GetTool().GetVariants(), func(v *registryv1.ToolVariant) bool { return v.GetAudienceClass() == class })
	if i < 0 {
		s.fail(q.w, q.r, http.StatusBadRequest, ReasonBadForm, "Choose one of the tool's audience classes.")
		return
	}
	v := t.GetTool().GetVariants()[i]
	resp, err := s.o.Admission.Check(q.ctx, &admissionv1.CheckRequest{ToolId: id, Generation: v.GetGeneration(),
		DescriptorDigest: v.GetDescriptorDigest(), Arguments: []byte(args), Mode: admissionv1.Mode_MODE_AUTONOMOUS,
		AudienceClass: class}, q.call)
	if err != nil {
		s.refuse(q, err)
		return
	}
	s.showTool(q, id, http.StatusOK, &checkResult{Class: class, Decision: enumName(resp.GetDecision()),
		Reason: enumName(resp.GetReason()), Detail: bounded(resp.GetDetail(), 300), Receipt: resp.GetReceipt().GetReceiptId()})
}

// serverView is one server on the servers page.
type serverView struct {
	Server      *registryv1.Server
	Runs        []*discoveryv1.Run
	Generations []classGenerations
	// CanClose: the user may close the server's pointers (a platform admin
	// or the server's owner); discovery decides again on the POST.
	CanClose bool
}

type classGenerations struct {
	Class       string
	Active      int64
	Generations []*discoveryv1.Generation
	// Pointer is the pointer's state (ACTIVE, CLOSED); unspecified when
	// discovery did not say.
	Pointer discoveryv1.PointerState
}

func (s *Server) servers(q *req) {
	resp, err := s.o.Registry.ListServers(q.ctx, &registryv1.ListServersRequest{PageSize: 100}, q.call)
	if err != nil {
		s.refuse(q, err)
		return
	}
	// The registry answers a tenant's user only the servers its tenant
	// owns or its audience classes cover; the page applies the same rule
	// again, so that it never shows another tenant's server whatever the
	// registry's answer.
	covered := map[string]bool{}
	if !q.p.Admin && !q.p.Service {
		pol, err := s.o.Registry.GetPolicy(q.ctx, &registryv1.GetPolicyRequest{TenantId: q.p.Tenant}, q.call)
		if err == nil {
			for _, c := range pol.GetPolicy().GetAudienceClasses() {
				for _, as := range c.GetServers() {
					covered[as.GetServerId()] = true
				}
			}
		}
	}
	var views []serverView
	for _, srv := range resp.GetServers() {
		if !q.p.Admin && !q.p.Service && !covered[srv.GetServerId()] && !ownerTenant(srv.GetOwner(), q.p.Tenant) {
			continue
		}
		sv := serverView{Server: srv, CanClose: canManage(q, srv.GetOwner())}
		runs, err := s.o.Discovery.ListRuns(q.ctx, &discoveryv1.ListRunsRequest{ServerId: srv.GetServerId(), PageSize: 10}, q.call)
		if err == nil {
			sv.Runs = runs.GetRuns()
		}
		var seen []string
		for _, r := range sv.Runs {
			if slices.Contains(seen, r.GetAudienceClass()) {
				continue
			}
			seen = append(seen, r.GetAudienceClass())
			gens, err := s.o.Discovery.ListGenerations(q.ctx, &discoveryv1.ListGenerationsRequest{ServerId: srv.GetServerId(),
				AudienceClass: r.GetAudienceClass(), PageSize: 5}, q.call)
			if err != nil {
				continue
			}
			cg := classGenerations{Class: r.GetAudienceClass(), Generations: gens.GetGenerations()}
			for _, g := range cg.Generations {
				if g.GetActive() {
					cg.Active = g.GetGeneration()
				}
			}
			if a, err := s.o.Discovery.GetActiveSnapshot(q.ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: srv.GetServerId(),
				AudienceClass: r.GetAudienceClass()}, q.call); err == nil {
				cg.Pointer = a.GetPointer().GetState()
			}
			sv.Generations = append(sv.Generations, cg)
		}
		views = append(views, sv)
	}
	pg := q.page("Servers", "servers", map[string]any{"Servers": views})
	pg.Notice = notices[q.r.URL.Query().Get("done")]
	s.render(q.w, q.r, http.StatusOK, "servers", pg)
}

// ownerTenant reports whether owner (`tenant/group:x` or `tenant/user:x`)
// belongs to tenant.
func ownerTenant(owner, tenant string) bool {
	o, err := principal.ParseOwner(owner)
	return err == nil && tenant != "" && o.Tenant == tenant
}

func (s *Server) serverID(q *req) (string, bool) {
	id := q.r.PathValue("id")
	if !ids.ValidServerID(id) {
		s.fail(q.w, q.r, http.StatusBadRequest, ReasonBadForm, "That is not a server id.")
		return "", false
	}
	return id, true
}

func (s *Server) rescan(q *req) {
	id, ok := s.serverID(q)
	if !ok {
		return
	}
	if _, err := s.o.Discovery.TriggerScan(q.ctx, &discoveryv1.TriggerScanRequest{ServerId: id}, q.call); err != nil {
		s.refuse(q, err)
		return
	}
	http.Redirect(q.w, q.r, "/servers?done=rescan", http.StatusSeeOther)
}

func (s *Server) rollbackServer(q *req) {
	id, ok := s.serverID(q)
	if !ok {
		return
	}
	gen, err := strconv.ParseInt(q.r.PostForm.Get("expected_generation"), 10, 64)
	class := q.r.PostForm.Get("class")
	if err != nil || gen < 1 || !ids.ValidClass(class) {
		s.fail(q.w, q.r, http.StatusBadRequest, ReasonBadForm, "The audience class or the expected generation is missing.")
		return
	}
	if _, err := s.o.Discovery.Rollback(q.ctx, &discoveryv1.RollbackRequest{ServerId: id, AudienceClass: class, ExpectedGeneration: gen,
		Reason: bounded(q.r.PostForm.Get("reason"), 200)}, q.call); err != nil {
		s.refuse(q, err)
		return
	}
	http.Redirect(q.w, q.r, "/servers?done=pointer", http.StatusSeeOther)
}

// closeServer closes the pointer of one (server, class) with the user's
// token: discovery decides whether the user may (a platform admin or the
// server's owner) and refuses a stale expected generation.
func (s *Server) closeServer(q *req) {
	id, ok := s.serverID(q)
	if !ok {
		return
	}
	gen, err := strconv.ParseInt(q.r.PostForm.Get("expected_generation"), 10, 64)
	class := q.r.PostForm.Get("class")
	reason := bounded(q.r.PostForm.Get("reason"), 200)
	if err != nil || gen < 1 || !ids.ValidClass(class) || reason == "" {
		s.fail(q.w, q.r, http.StatusBadRequest, ReasonBadForm, "Closing needs the audience class, the expected generation and a reason.")
		return
	}
	if _, err := s.o.Discovery.ClosePointer(q.ctx, &discoveryv1.ClosePointerRequest{ServerId: id, AudienceClass: class,
		ExpectedGeneration: gen, Reason: reason}, q.call); err != nil {
		s.refuse(q, err)
		return
	}
	http.Redirect(q.w, q.r, "/servers?done=closed", http.StatusSeeOther)
}

func (s *Server) tenant(q *req) {
	tenant := q.p.Tenant
	if t := q.r.URL.Query().Get("tenant"); t != "" {
		tenant = t
	}
	var atEpoch int64
	if e := q.r.URL.Query().Get("epoch"); e != "" {
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil || n < 1 {
			s.fail(q.w, q.r, http.StatusBadRequest, ReasonBadForm, "The epoch must be a positive number.")
			return
		}
		atEpoch = n
	}
	if !ids.ValidTenantID(tenant) {
		s.fail(q.w, q.r, http.StatusBadRequest, ReasonBadForm, "That is not a tenant id.")
		return
	}
	resp, err := s.o.Registry.GetPolicy(q.ctx, &registryv1.GetPolicyRequest{TenantId: tenant, AtEpoch: atEpoch}, q.call)
	if err != nil {
		s.refuse(q, err)
		return
	}
	pg := q.page("Tenant "+tenant, "tenant", map[string]any{"Tenant": tenant, "Policy": resp.GetPolicy(), "AtEpoch": atEpoch,
		"CanRevoke": q.p.Admin && atEpoch == 0})
	pg.Notice = notices[q.r.URL.Query().Get("done")]
	s.render(q.w, q.r, http.StatusOK, "tenant", pg)
}

func (s *Server) revoke(q *req) {
	f := q.r.PostForm
	tenant := f.Get("tenant")
	if !ids.ValidTenantID(tenant) || (f.Get("subject") == "") == (f.Get("group") == "") {
		s.fail(q.w, q.r, http.StatusBadRequest, ReasonBadForm, "Name the tenant and one subject or one group.")
		return
	}
	req := &registryv1.RevokeScopesRequest{TenantId: tenant, Subject: f.Get("subject"), Group: f.Get("group"),
		Scopes: f["scope"], AudienceClasses: f["class"]}
	if len(req.Scopes) == 0 && len(req.AudienceClasses) == 0 {
		s.fail(q.w, q.r, http.StatusBadRequest, ReasonBadForm, "Choose a scope or an audience class to revoke.")
		return
	}
	if _, err := s.o.Registry.RevokeScopes(q.ctx, req, q.call); err != nil {
		s.refuse(q, err)
		return
	}
	http.Redirect(q.w, q.r, "/tenant?tenant="+tenant+"&done=revoked", http.StatusSeeOther)
}
