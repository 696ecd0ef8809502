package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/console/internal/diff"
)

// page is what every template gets.
type page struct {
	Title string
	// Nav is the current section: queue, servers, tenant.
	Nav string
	// CSRF is the token every form of the page carries.
	CSRF string
	// User is the signed-in principal; nil on the sign-in page.
	User *principal.Principal
	// Notice and Problem are a message at the top of the page.
	Notice  string
	Problem *problem
	Data    any
}

// problem is a refusal shown on a page.
type problem struct {
	Reason, Message string
}

var funcs = template.FuncMap{
	"ts": func(t *timestamppb.Timestamp) string {
		if t == nil || !t.IsValid() || t.AsTime().IsZero() {
			return "—"
		}
		return t.AsTime().UTC().Format("2006-01-02 15:04:05Z")
	},
	"short": func(d string) string {
		if len(d) > 19 && strings.HasPrefix(d, "sha256:") {
			return d[:19] + "…"
		}
		return d
	},
	"ins":   func(op diff.Op) bool { return op == diff.Insert },
	"del":   func(op diff.Op) bool { return op == diff.Delete },
	"same":  func(op diff.Op) bool { return op == diff.Equal },
	"join":  strings.Join,
	"enum":  enumName,
	"since": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
}

// enumName is a proto enum's name without its type prefix:
// REVIEW_STATE_UNREVIEWED → UNREVIEWED.
func enumName(v fmt.Stringer) string {
	s := v.String()
	for _, p := range []string{"REVIEW_STATE_", "DISCOVERY_STATE_", "EFFECT_CLASS_", "AUTHORIZATION_", "CONFIRMATION_",
		"STAGE_", "DECISION_REASON_", "DECISION_", "REASON_", "RUN_REASON_", "GUARD_RULE_", "POINTER_STATE_", "TRUST_LEVEL_", "REVISION_SOURCE_", "POINTER_MOVE_", "FAULT_"} {
		if strings.HasPrefix(s, p) {
			return strings.TrimPrefix(s, p)
		}
	}
	return s
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	t, ok := s.pages[name]
	if !ok {
		http.Error(w, "no such page", http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	if err := t.Execute(&b, p); err != nil {
		s.o.Logger.ErrorContext(r.Context(), "render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if p.Problem != nil {
		w.Header().Set(ReasonHeader, p.Problem.Reason)
	}
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// fail answers a refusal the console decides itself.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, reason, msg string) {
	s.render(w, r, code, "error", page{Title: "Refused", Problem: &problem{Reason: reason, Message: msg}})
}

// refusal turns a service's error into an HTTP status and a problem:
// the gRPC code, the ErrorInfo reason, the service's message cut short.
func refusal(err error) (int, *problem) {
	st := status.Convert(err)
	reason := st.Code().String()
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() != "" {
			reason = ei.GetReason()
		}
	}
	msg := st.Message()
	if len(msg) > 300 {
		msg = strings.ToValidUTF8(msg[:300], "") + "…"
	}
	code := http.StatusBadGateway
	switch st.Code() {
	case codes.PermissionDenied:
		code = http.StatusForbidden
	case codes.Unauthenticated:
		code = http.StatusUnauthorized
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.FailedPrecondition, codes.Aborted, codes.AlreadyExists:
		code = http.StatusConflict
	case codes.InvalidArgument, codes.OutOfRange:
		code = http.StatusBadRequest
	case codes.Unavailable, codes.DeadlineExceeded:
		code = http.StatusServiceUnavailable
		reason = ReasonUnavailable
	}
	return code, &problem{Reason: reason, Message: msg}
}

// page is the base page of a signed-in request.
func (q *req) page(title, nav string, data any) page {
	p := q.p
	return page{Title: title, Nav: nav, CSRF: q.sess.CSRF, User: &p, Data: data}
}

// refuse renders a service's refusal on the error page.
func (s *Server) refuse(q *req, err error) {
	code, pr := refusal(err)
	pg := q.page("Refused", "", nil)
	pg.Problem = pr
	s.render(q.w, q.r, code, "error", pg)
}

// prettyJSON indents raw JSON for display, bounded to maxShow bytes.
func prettyJSON(raw []byte) string {
	const maxShow = 64 << 10
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		b.Reset()
		b.Write(raw)
	}
	if b.Len() > maxShow {
		return strings.ToValidUTF8(b.String()[:maxShow], "") + "\n… (cut at 64 KiB)"
	}
	return b.String()
}
