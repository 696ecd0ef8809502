// Package oidctest runs a real OpenID Provider (zitadel's op package over
// its example in-memory storage) on loopback for tests: it serves discovery
// and its key set, issues JWT access tokens by the client-credentials grant
// with the claims a test asks for, rotates its signing key, removes old
// keys, and can be taken down and brought back.
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
	st := &store{Storage: storage.NewStorage(storage.NewUserStore(issuer)), clients: map[string]*client{}, audience: audience}
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

// store is the example storage with rotating ES256 keys and
// client-credentials clients that get JWT access tokens with set claims.
type store struct {
	*storage.Storage
	audience string

	mu      sync.Mutex
	keys    []*signingKey // the last one signs
	clients map[string]*client
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

func (s *store) GetPrivateClaimsFromScopes(_ context.Context, _, clientID string, _ []string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[clientID]; ok {
		return c.claims, nil
	}
	return nil, nil
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
