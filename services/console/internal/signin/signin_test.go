package signin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// provider is an authorization server for the test: discovery, a key set,
// /authorize that remembers the PKCE challenge and nonce of each code, and
// /token that redeems a code only with the verifier whose S256 hash is
// that challenge (RFC 7636 §4.6), once.
type provider struct {
	srv    *httptest.Server
	signer jose.Signer
	key    *ecdsa.PrivateKey
	mu     sync.Mutex
	codes  map[string]grant
	// nonceOverride, when set, is put in the ID token instead of the
	// request's nonce (a replayed or forged ID token).
	nonceOverride string
}

type grant struct{ challenge, method, nonce string }

func newProvider(t *testing.T) *provider {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &provider{signer: signer, key: key, codes: map[string]grant{}}
	mux := http.NewServeMux()
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	iss := p.srv.URL
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": iss, "authorization_endpoint": iss + "/authorize",
			"token_endpoint": iss + "/token", "jwks_uri": iss + "/jwks", "id_token_signing_alg_values_supported": []string{"ES256"},
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
			"code_challenge_methods_supported": []string{"S256"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("response_type") != "code" || q.Get("code_challenge") == "" || q.Get("code_verifier") != "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		code := rand.Text()
		p.mu.Lock()
		p.codes[code] = grant{q.Get("code_challenge"), q.Get("code_challenge_method"), q.Get("nonce")}
		p.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+code+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		p.mu.Lock()
		g, ok := p.codes[r.PostForm.Get("code")]
		delete(p.codes, r.PostForm.Get("code"))
		p.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || g.method != "S256" || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		nonce := g.nonce
		if p.nonceOverride != "" {
			nonce = p.nonceOverride
		}
		now := time.Now()
		id, _ := jwt.Signed(p.signer).Claims(jwt.Claims{Issuer: iss, Subject: "bob", Audience: jwt.Audience{"console"},
			IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}).Claims(map[string]any{"nonce": nonce}).Serialize()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "access-for-bob", "token_type": "Bearer", "id_token": id, "expires_in": 3600})
	})
	return p
}

// flow runs the browser's part: follow the auth URL to the provider,
// which redirects back with code and state.
func flow(t *testing.T, authURL string) (code, state string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize answered %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return loc.Query().Get("code"), loc.Query().Get("state")
}

func client(t *testing.T, p *provider, field string) *Client {
	c, err := New(context.Background(), Options{Issuer: p.srv.URL, ClientID: "console", RedirectURL: "http://127.0.0.1:1/signin/callback",
		Scopes: []string{"profile"}, TokenField: field})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCodeFlowWithPKCE(t *testing.T) {
	p := newProvider(t)
	c := client(t, p, "access_token")
	verifier, nonce := rand.Text()+rand.Text(), rand.Text()
	u := c.AuthURL("state-1", nonce, verifier)
	q, _ := url.Parse(u)
	if got := q.Query(); got.Get("code_challenge_method") != "S256" || got.Get("code_challenge") == "" ||
		got.Get("code_verifier") != "" || got.Get("nonce") != nonce || got.Get("scope") != "openid profile" {
		t.Fatalf("auth URL %s", u)
	}
	code, state := flow(t, u)
	if state != "state-1" {
		t.Fatalf("state %q", state)
	}
	tok, err := c.Exchange(context.Background(), code, verifier, nonce)
	if err != nil || tok != "access-for-bob" {
		t.Fatalf("Exchange = %q, %v", tok, err)
	}
	// The same code again: refused (the provider redeems a code once).
	if _, err := c.Exchange(context.Background(), code, verifier, nonce); reasonOf(err) != ReasonExchange {
		t.Fatalf("code reuse: %v", err)
	}
}

func TestIDTokenField(t *testing.T) {
	p := newProvider(t)
	c := client(t, p, "id_token")
	verifier, nonce := rand.Text()+rand.Text(), rand.Text()
	code, _ := flow(t, c.AuthURL("s", nonce, verifier))
	tok, err := c.Exchange(context.Background(), code, verifier, nonce)
	if err != nil || tok == "access-for-bob" || tok == "" {
		t.Fatalf("Exchange = %q, %v", tok, err)
	}
}

func TestWrongVerifierRefused(t *testing.T) {
	p := newProvider(t)
	c := client(t, p, "access_token")
	verifier, nonce := rand.Text()+rand.Text(), rand.Text()
	code, _ := flow(t, c.AuthURL("s", nonce, verifier))
	// An attacker holding the code but not the verifier.
	if _, err := c.Exchange(context.Background(), code, rand.Text()+rand.Text(), nonce); reasonOf(err) != ReasonExchange {
		t.Fatalf("wrong verifier: %v", err)
	}
}

func TestNonceMismatchRefused(t *testing.T) {
	p := newProvider(t)
	p.nonceOverride = "another sign-in's nonce"
	c := client(t, p, "access_token")
	verifier, nonce := rand.Text()+rand.Text(), rand.Text()
	code, _ := flow(t, c.AuthURL("s", nonce, verifier))
	if _, err := c.Exchange(context.Background(), code, verifier, nonce); reasonOf(err) != ReasonNonce {
		t.Fatalf("nonce mismatch: %v", err)
	}
}

func reasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}
