// Package oidctest runs a real OpenID Provider (zitadel's op package over
// its example in-memory storage) on loopback for tests: it serves discovery
// and its key set, issues JWT access tokens by the client-credentials grant
// with the claims a test asks for, signs a user in by the authorization
// code flow with PKCE for a public client ([Provider.CodeClient]: the login
// page signs in the user [Provider.SignInAs] names), rotates its signing
// key, removes old keys, and can be taken down and brought back.
package oidctest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Provider is a running OpenID Provider.
type Provider struct {
	// Issuer is the provider's issuer URL (http://127.0.0.1:port).
	Issuer string
	// Audience is the `aud` of the access tokens it issues.
	Audience string

	srv   *httptest.Server
	store *store
	down  atomic.Bool
	// issuing serialises Token: a client's claims are set, then its token
	// is issued.
	issuing sync.Mutex
}

// Start runs a provider whose tokens carry audience; it stops when the test
// ends.
func Start(t testing.TB, audience string) *Provider {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String()
	users := storage.NewUserStore(issuer)
	st := &store{Storage: storage.NewStorage(users), clients: map[string]*client{}, codeClients: map[string]*codeClient{},
		userClaims: map[string]map[string]any{}, audience: audience}
	st.rotate()
	p := &Provider{Issuer: issuer, Audience: audience, srv: srv, store: st}
	o, err := op.NewOpenIDProvider(issuer, &op.Config{CryptoKey: sha256.Sum256([]byte(issuer))}, st, op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			http.Error(w, "provider down", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == loginPath {
			p.login(w, r)
			return
		}
		o.ServeHTTP(w, r)
	})
	srv.Start()
	t.Cleanup(srv.Close)
	return p
}

// URL returns the issuer URL.
func (p *Provider) URL() string { return p.Issuer }

// SetDown makes every request to the provider fail (true) or serves again.
func (p *Provider) SetDown(down bool) { p.down.Store(down) }

// Rotate makes a new signing key current; the old keys stay published.
// It returns the new key's id.
func (p *Provider) Rotate() string { return p.store.rotate() }

// RemoveKey stops publishing the key kid.
func (p *Provider) RemoveKey(kid string) { p.store.remove(kid) }

// CurrentKeyID is the id of the key that signs new tokens.
func (p *Provider) CurrentKeyID() string {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	return p.store.keys[len(p.store.keys)-1].id
}

// Token registers a client for subject (once) and returns a JWT access
// token for it from the provider's token endpoint, carrying claims as
// private claims (e.g. tenant and groups).
func (p *Provider) Token(t testing.TB, subject string, claims map[string]any) string {
	t.Helper()
	p.issuing.Lock()
	defer p.issuing.Unlock()
	secret := "secret-" + subject
	p.store.mu.Lock()
	p.store.clients[subject] = &client{id: subject, secret: secret, claims: claims}
	p.store.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(subject), url.QueryEscape(secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("token endpoint: %d %s", resp.StatusCode, body)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("token endpoint answer %s: %v", body, err)
	}
	return tok.AccessToken
}

// loginPath is the provider's login page: it signs in the user
// [Provider.SignInAs] named for the authorization request it is given and
// goes on to the provider's callback, which redirects to the client with a
// code.
const loginPath = "/login"

// The example user store's users, by id (the token's `sub`).
const (
	// User1 is "test-user@<host>".
	User1 = "id1"
	// User2 is "test-user2".
	User2 = "id2"
)

// CodeClient registers a public client (no secret: PKCE only) whose
// redirect URIs are matched by the glob redirectGlob (e.g.
// "http://127.0.0.1:*/signin/callback") and whose access tokens are JWTs;
// the access token's `aud` is the client id, so a client named like the
// services' audience gets tokens the services accept.
func (p *Provider) CodeClient(id, redirectGlob string) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.codeClients[id] = &codeClient{id: id, redirectGlob: redirectGlob}
}

// SignInAs makes the login page sign in user (User1 or User2), whose
// tokens then carry claims as private claims (e.g. tenant and groups).
func (p *Provider) SignInAs(user string, claims map[string]any) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.loginUser = user
	p.store.userClaims[user] = claims
}

// login completes the authorization request authRequestID as the user
// SignInAs named (the example storage checks its username and password)
// and redirects to the provider's callback.
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("authRequestID")
	p.store.mu.Lock()
	user := p.store.loginUser
	p.store.mu.Unlock()
	names := map[string]string{User1: "test-user@127.0.0.1", User2: "test-user2"}
	if names[user] == "" {
		http.Error(w, "no user to sign in (SignInAs)", http.StatusForbidden)
		return
	}
	if err := p.store.CheckUsernamePassword(names[user], "verysecure", id); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, p.Issuer+"/authorize/callback?id="+url.QueryEscape(id), http.StatusFound)
}

// store is the example storage with rotating ES256 keys,
// client-credentials clients that get JWT access tokens with set claims,
// and authorization-code clients whose users' tokens carry set claims.
type store struct {
	*storage.Storage
	audience string

	mu          sync.Mutex
	keys        []*signingKey // the last one signs
	clients     map[string]*client
	codeClients map[string]*codeClient
	loginUser   string
	userClaims  map[string]map[string]any
}

// GetClientByClientID is the example storage's, with the code clients
// first.
func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	c, ok := s.codeClients[id]
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

type signingKey struct {
	id  string
	key *ecdsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.ES256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ *signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.ES256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

func (s *store) rotate() string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := &signingKey{id: fmt.Sprintf("key-%d-%x", len(s.keys)+1, key.X.Bytes()[:4]), key: key}
	s.keys = append(s.keys, k)
	return k.id
}

func (s *store) remove(kid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := range s.keys {
		if k.id == kid {
			s.keys = append(s.keys[:i], s.keys[i+1:]...)
			return
		}
	}
}

func (s *store) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.keys) == 0 {
		return nil, errors.New("no signing key")
	}
	return s.keys[len(s.keys)-1], nil
}

func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.ES256}, nil
}

func (s *store) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]op.Key, 0, len(s.keys))
	for _, k := range s.keys {
		keys = append(keys, publicKey{k})
	}
	return keys, nil
}

func (s *store) ClientCredentials(_ context.Context, clientID, clientSecret string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[clientID]
	if !ok || c.secret != clientSecret {
		return nil, errors.New("wrong client or secret")
	}
	return c, nil
}

func (s *store) ClientCredentialsTokenRequest(_ context.Context, clientID string, scopes []string) (op.TokenRequest, error) {
	return &oidc.JWTTokenRequest{Subject: clientID, Audience: []string{s.audience}, Scopes: scopes}, nil
}

func (s *store) GetPrivateClaimsFromScopes(_ context.Context, userID, clientID string, _ []string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.codeClients[clientID]; ok {
		return s.userClaims[userID], nil
	}
	if c, ok := s.clients[clientID]; ok {
		return c.claims, nil
	}
	return nil, nil
}

// codeClient is a public authorization-code client (PKCE) whose access
// tokens are JWTs.
type codeClient struct {
	id, redirectGlob string
}

func (c *codeClient) GetID() string                        { return c.id }
func (c *codeClient) RedirectURIs() []string               { return nil }
func (c *codeClient) RedirectURIGlobs() []string           { return []string{c.redirectGlob} }
func (c *codeClient) PostLogoutRedirectURIs() []string     { return nil }
func (c *codeClient) PostLogoutRedirectURIGlobs() []string { return nil }
func (c *codeClient) ApplicationType() op.ApplicationType  { return op.ApplicationTypeWeb }
func (c *codeClient) AuthMethod() oidc.AuthMethod          { return oidc.AuthMethodNone }
func (c *codeClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *codeClient) GrantTypes() []oidc.GrantType { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c *codeClient) LoginURL(id string) string {
	return loginPath + "?authRequestID=" + url.QueryEscape(id)
}
func (c *codeClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *codeClient) IDTokenLifetime() time.Duration       { return time.Hour }
func (c *codeClient) DevMode() bool                        { return true }
func (c *codeClient) IsScopeAllowed(string) bool           { return true }
func (c *codeClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *codeClient) ClockSkew() time.Duration             { return 0 }
func (c *codeClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *codeClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// client is a client-credentials client whose access tokens are JWTs.
type client struct {
	id, secret string
	claims     map[string]any
}

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return nil }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType  { return nil }
func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (c *client) LoginURL(string) string               { return "" }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration       { return time.Hour }
func (c *client) DevMode() bool                        { return true }
func (c *client) IsScopeAllowed(string) bool           { return true }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
