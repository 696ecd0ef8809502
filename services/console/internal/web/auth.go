package web

import (
	"errors"
	"net/http"
	"time"

	"github.com/toolcrib/toolcrib/services/console/internal/session"
	"github.com/toolcrib/toolcrib/services/console/internal/signin"
)

// preCookie carries the sign-in form's CSRF token before there is a
// session (double submit: the form's field must equal the cookie).
const preCookie = "toolcrib-console-signin"

// pendingTTL bounds the time between the redirect to the provider and
// the callback.
const pendingTTL = 10 * time.Minute

func (s *Server) signinPage(w http.ResponseWriter, r *http.Request) {
	tok := session.NewID()
	s.setCookie(w, preCookie, tok, int(pendingTTL.Seconds()))
	s.render(w, r, http.StatusOK, "signin", page{Title: "Sign in", CSRF: tok, Data: map[string]any{
		"OIDC": s.o.OIDC != nil, "Dev": s.o.DevSignIn}})
}

// signinDev signs in with a pasted token (--dev-sign-in): the token must
// verify as the services verify it.
func (s *Server) signinDev(w http.ResponseWriter, r *http.Request) {
	if !s.o.DevSignIn {
		http.NotFound(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, ReasonBadForm, "The form could not be read.")
		return
	}
	c, err := r.Cookie(preCookie)
	if err != nil || !s.sameOrigin(r) || c.Value == "" || r.PostForm.Get("csrf") != c.Value {
		s.fail(w, r, http.StatusForbidden, ReasonCSRF, "The sign-in form was not sent from this console's page; reload it and try again.")
		return
	}
	token := r.PostForm.Get("token")
	if token == "" || len(token) > maxTokenBytes {
		s.fail(w, r, http.StatusBadRequest, ReasonBadForm, "Paste a token (at most 16 KiB).")
		return
	}
	s.startSession(w, r, token)
}

func (s *Server) startSession(w http.ResponseWriter, r *http.Request, token string) {
	p, err := s.o.Verifier.Verify(token)
	if err != nil {
		s.fail(w, r, http.StatusUnauthorized, ReasonTokenInvalid, "That token does not verify (signature, issuer, audience or expiry).")
		return
	}
	exp := time.Now().Add(s.o.SessionTTL)
	if !p.ExpiresAt.IsZero() && p.ExpiresAt.Before(exp) {
		exp = p.ExpiresAt
	}
	id, err := s.o.Sessions.Create(r.Context(), session.Session{Token: token, CSRF: session.NewID(), Expires: exp})
	if err != nil {
		s.o.Logger.WarnContext(r.Context(), "session store", "err", err)
		s.fail(w, r, http.StatusServiceUnavailable, ReasonUnavailable, "The session store did not answer; try again.")
		return
	}
	s.setCookie(w, preCookie, "", -1)
	s.setCookie(w, s.cookieName(), id, int(time.Until(exp).Seconds()))
	s.o.Logger.InfoContext(r.Context(), "signed in", "sub", p.Subject, "tenant", p.Tenant)
	http.Redirect(w, r, "/queue", http.StatusSeeOther)
}

// signinOIDC sends the browser to the provider: code flow, PKCE S256,
// state and nonce kept server-side for one callback.
func (s *Server) signinOIDC(w http.ResponseWriter, r *http.Request) {
	if s.o.OIDC == nil {
		http.NotFound(w, r)
		return
	}
	state, verifier, nonce := session.NewID(), session.NewID()+session.NewID(), session.NewID()
	if err := s.o.Sessions.PutPending(r.Context(), state, session.Pending{Verifier: verifier, Nonce: nonce}, pendingTTL); err != nil {
		s.o.Logger.WarnContext(r.Context(), "session store", "err", err)
		s.fail(w, r, http.StatusServiceUnavailable, ReasonUnavailable, "The session store did not answer; try again.")
		return
	}
	http.Redirect(w, r, s.o.OIDC.AuthURL(state, nonce, verifier), http.StatusSeeOther)
}

func (s *Server) signinCallback(w http.ResponseWriter, r *http.Request) {
	if s.o.OIDC == nil {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	pend, err := s.o.Sessions.TakePending(r.Context(), q.Get("state"))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, ReasonSignInState, "This sign-in link is unknown, used or expired; start again.")
		return
	}
	if q.Get("error") != "" {
		s.fail(w, r, http.StatusUnauthorized, signin.ReasonProviderError, "The identity provider refused the sign-in.")
		return
	}
	token, err := s.o.OIDC.Exchange(r.Context(), q.Get("code"), pend.Verifier, pend.Nonce)
	if err != nil {
		var se *signin.Error
		reason := signin.ReasonExchange
		if errors.As(err, &se) {
			reason = se.Reason
		}
		s.o.Logger.WarnContext(r.Context(), "oidc sign-in refused", "err", err)
		s.fail(w, r, http.StatusUnauthorized, reason, "The sign-in could not be completed with the identity provider.")
		return
	}
	s.startSession(w, r, token)
}

func (s *Server) signout(q *req) {
	_ = s.o.Sessions.Delete(q.ctx, q.sid)
	s.setCookie(q.w, s.cookieName(), "", -1)
	http.Redirect(q.w, q.r, "/signin", http.StatusSeeOther)
}
