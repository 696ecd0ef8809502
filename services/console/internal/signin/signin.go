// Package signin is the console's OpenID Connect client: the
// authorization code flow with PKCE (RFC 7636, S256) and a nonce, against
// the operator's issuer found by OIDC discovery. It returns the token the
// console then presents to the services for the user; the services (and the
// console, before it makes a session) verify that token as every bearer
// token is verified.
package signin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Reasons a callback is refused (shown to the user, logged); constants.
const (
	ReasonProviderError = "OIDC_PROVIDER_ERROR"
	ReasonExchange      = "OIDC_CODE_EXCHANGE_FAILED"
	ReasonNoToken       = "OIDC_TOKEN_MISSING"
	ReasonIDToken       = "OIDC_ID_TOKEN_INVALID"
	ReasonNonce         = "OIDC_NONCE_MISMATCH"
)

// Error is a refused callback; Reason is one of the Reason constants.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Client signs users in at one issuer.
type Client struct {
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	field    string
	http     *http.Client
}

// Options configure a [Client].
type Options struct {
	// Issuer is the provider's issuer URL (OIDC discovery).
	Issuer string
	// ClientID and ClientSecret are the console's client; the secret may be
	// empty (a public client: PKCE only).
	ClientID, ClientSecret string
	// RedirectURL is <console>/signin/callback.
	RedirectURL string
	// Scopes asked for; `openid` is added when missing.
	Scopes []string
	// TokenField is `access_token` or `id_token`: the token presented to
	// the services.
	TokenField string
	// HTTP is the client for the provider; nil means http.DefaultClient.
	HTTP *http.Client
}

// New discovers the issuer's endpoints and returns a client.
func New(ctx context.Context, o Options) (*Client, error) {
	hc := o.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	ctx = oidc.ClientContext(ctx, hc)
	p, err := oidc.NewProvider(ctx, o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc discovery: %w", err)
	}
	scopes := o.Scopes
	if !contains(scopes, oidc.ScopeOpenID) {
		scopes = append([]string{oidc.ScopeOpenID}, scopes...)
	}
	return &Client{
		oauth: oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, Endpoint: p.Endpoint(),
			RedirectURL: o.RedirectURL, Scopes: scopes},
		verifier: p.Verifier(&oidc.Config{ClientID: o.ClientID}),
		field:    o.TokenField,
		http:     hc,
	}, nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// AuthURL is the provider URL the browser is sent to: the code flow with
// state, nonce and the S256 challenge of verifier.
func (c *Client) AuthURL(state, nonce, verifier string) string {
	return c.oauth.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce))
}

// Exchange redeems code with the PKCE verifier, checks the ID token (its
// signature, issuer, audience and nonce) and returns the token the console
// presents for the user.
func (c *Client) Exchange(ctx context.Context, code, verifier, nonce string) (string, error) {
	ctx = oidc.ClientContext(ctx, c.http)
	tok, err := c.oauth.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return "", &Error{Reason: ReasonExchange, Err: errors.New(cutErr(err))}
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		return "", &Error{Reason: ReasonNoToken, Err: errors.New("no id_token in the answer")}
	}
	idt, err := c.verifier.Verify(ctx, rawID)
	if err != nil {
		return "", &Error{Reason: ReasonIDToken, Err: errors.New(cutErr(err))}
	}
	if idt.Nonce != nonce {
		return "", &Error{Reason: ReasonNonce}
	}
	if c.field == "id_token" {
		return rawID, nil
	}
	if tok.AccessToken == "" {
		return "", &Error{Reason: ReasonNoToken, Err: errors.New("no access_token in the answer")}
	}
	return tok.AccessToken, nil
}

// cutErr bounds an error text that may quote the provider's answer.
func cutErr(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.ToValidUTF8(s, "")
}
