package web

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/console/internal/session"
	"github.com/toolcrib/toolcrib/services/console/internal/signin"
)

// Reasons the console itself refuses a request with, sent in the
// [ReasonHeader] and shown on the page. A refusal by a service carries
// that service's reason instead.
const (
	// ReasonCSRF: a POST without this session's CSRF token, or from
	// another origin.
	ReasonCSRF = "CSRF_TOKEN_INVALID"
	// ReasonSignedOut: no session (never signed in, expired, signed out).
	ReasonSignedOut = "NOT_SIGNED_IN"
	// ReasonTokenInvalid: the token given at sign-in, or the session's
	// token now, does not verify.
	ReasonTokenInvalid = "TOKEN_INVALID"
	// ReasonSignInState: an OIDC callback whose state is unknown, used or
	// expired.
	ReasonSignInState = "SIGNIN_STATE_INVALID"
	// ReasonBadForm: a form field is missing or malformed.
	ReasonBadForm = "FORM_INVALID"
	// ReasonUnavailable: a service did not answer.
	ReasonUnavailable = "SERVICE_UNAVAILABLE"
)

// ReasonHeader names the response header that carries the reason of a
// refusal (the console's or a service's ErrorInfo reason).
const ReasonHeader = "X-Toolcrib-Reason"

// ContentSecurityPolicy is sent with every response: no script, no frame,
// styles and images from the console only, forms posting only to it.
const ContentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// maxFormBytes bounds a form body; maxTokenBytes a pasted token.
const (
	maxFormBytes  = 64 << 10
	maxTokenBytes = 16 << 10
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options are what the pages need.
type Options struct {
	Registry  registryv1.RegistryServiceClient
	Discovery discoveryv1.DiscoveryServiceClient
	Admission admissionv1.AdmissionServiceClient
	// Verifier verifies a user's token as the services do.
	Verifier *principal.Verifier
	Sessions *session.Store
	// OIDC signs users in; nil when --oidc-issuer is not set.
	OIDC *signin.Client
	// DevSignIn offers pasting a token.
	DevSignIn bool
	// Secure marks cookies Secure (the console serves TLS or sits behind
	// an https public URL).
	Secure bool
	// BaseURL is the console's public URL (its origin is the only one a
	// form may be posted from).
	BaseURL string
	// SessionTTL bounds a session; CallTimeout each call to a service.
	SessionTTL, CallTimeout time.Duration
	Logger                  *slog.Logger
}

// Server serves the pages.
type Server struct {
	o      Options
	origin string
	pages  map[string]*template.Template
	mux    *http.ServeMux
}

// New returns the console's handler.
func New(o Options) (*Server, error) {
	s := &Server{o: o, pages: map[string]*template.Template{}, mux: http.NewServeMux()}
	if u, err := url.Parse(o.BaseURL); err == nil {
		s.origin = u.Scheme + "://" + u.Host
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, err
		}
		s.pages[base] = t
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/queue", http.StatusSeeOther) })
	s.mux.HandleFunc("GET /signin", s.signinPage)
	s.mux.HandleFunc("POST /signin/dev", s.signinDev)
	s.mux.HandleFunc("GET /signin/oidc", s.signinOIDC)
	s.mux.HandleFunc("GET /signin/callback", s.signinCallback)
	s.mux.HandleFunc("POST /signout", s.user(s.signout))
	s.mux.HandleFunc("GET /queue", s.user(s.queue))
	s.mux.HandleFunc("GET /tools/{id}", s.user(s.tool))
	s.mux.HandleFunc("GET /tools/{id}/review", s.user(s.review))
	s.mux.HandleFunc("POST /tools/{id}/approve", s.user(s.approve))
	s.mux.HandleFunc("POST /tools/{id}/enable", s.user(s.enable))
	s.mux.HandleFunc("POST /tools/{id}/disable", s.user(s.disable))
	s.mux.HandleFunc("POST /tools/{id}/rollback", s.user(s.rollbackTool))
	s.mux.HandleFunc("POST /tools/{id}/check", s.user(s.check))
	s.mux.HandleFunc("GET /servers", s.user(s.servers))
	s.mux.HandleFunc("POST /servers/{id}/rescan", s.user(s.rescan))
	s.mux.HandleFunc("POST /servers/{id}/rollback", s.user(s.rollbackServer))
	s.mux.HandleFunc("POST /servers/{id}/close", s.user(s.closeServer))
	s.mux.HandleFunc("GET /tenant", s.user(s.tenant))
	s.mux.HandleFunc("POST /tenant/revoke", s.user(s.revoke))
	return s, nil
}

// ServeHTTP sets the security headers on every response, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// `Origin: null` with its form posts, and the origin check needs the origin.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if s.o.Secure {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		h.Set("Cache-Control", "no-store")
	}
	s.mux.ServeHTTP(w, r)
}

// cookieName is the session cookie's name: the __Host- prefix (Secure,
// Path=/, no Domain: the browser refuses it otherwise) under TLS.
func (s *Server) cookieName() string {
	if s.o.Secure {
		return "__Host-toolcrib-console"
	}
	return "toolcrib-console"
}

func (s *Server) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.o.Secure, SameSite: http.SameSiteStrictMode})
}

// req is one signed-in request.
type req struct {
	w    http.ResponseWriter
	r    *http.Request
	sess session.Session
	sid  string
	p    principal.Principal
	ctx  context.Context
	// call is the per-call credential: the user's token, nothing else.
	call grpc.CallOption
}

// user wraps a handler of a signed-in user: no session → the sign-in page
// (GET) or 401 (POST); a POST must carry the session's CSRF token and come
// from the console's own origin.
func (s *Server) user(h func(*req)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(s.cookieName())
		var sess session.Session
		if err == nil {
			sess, err = s.o.Sessions.Get(r.Context(), c.Value)
		}
		if err != nil {
			if !errors.Is(err, session.ErrNotFound) && !errors.Is(err, http.ErrNoCookie) {
				s.o.Logger.WarnContext(r.Context(), "session store", "err", err)
				s.fail(w, r, http.StatusServiceUnavailable, ReasonUnavailable, "The session store did not answer; try again.")
				return
			}
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/signin", http.StatusSeeOther)
				return
			}
			s.fail(w, r, http.StatusUnauthorized, ReasonSignedOut, "Sign in first.")
			return
		}
		p, err := s.o.Verifier.Verify(sess.Token)
		if err != nil {
			// The token expired or its key was withdrawn: the session ends.
			_ = s.o.Sessions.Delete(r.Context(), c.Value)
			s.setCookie(w, s.cookieName(), "", -1)
			s.fail(w, r, http.StatusUnauthorized, ReasonTokenInvalid, "Your sign-in is no longer valid; sign in again.")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				s.fail(w, r, http.StatusBadRequest, ReasonBadForm, "The form could not be read.")
				return
			}
			if !s.sameOrigin(r) || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(sess.CSRF)) != 1 {
				s.fail(w, r, http.StatusForbidden, ReasonCSRF, "The form was not sent from this console's page (CSRF token missing or wrong); reload the page and try again.")
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.o.CallTimeout)
		defer cancel()
		h(&req{w: w, r: r, sess: sess, sid: c.Value, p: p, ctx: ctx, call: grpc.PerRPCCredentials(principal.BearerToken(sess.Token))})
	}
}

// sameOrigin: a browser sends Origin on every POST; when it does, it must
// be the console's (the CSRF token is the primary defence; this is the
// second).
func (s *Server) sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	if s.origin != "" && o == s.origin {
		return true
	}
	// Behind no configured public URL, the Host the browser used.
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return o == scheme+"://"+r.Host
}
