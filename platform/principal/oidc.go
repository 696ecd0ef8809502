package principal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// Discovery configures a [Verifier] that finds its keys at OpenID
// providers (OpenID Connect discovery, then the provider's `jwks_uri`)
// instead of in a JWKS file.
type Discovery struct {
	// Issuers are the trusted providers; a token's `iss` selects one, and a
	// token from any other issuer is refused.
	Issuers []Issuer
	// Refresh is how often each issuer's keys are fetched again; 0 means
	// [DefaultKeysRefresh].
	Refresh time.Duration
	// MaxStale is how long the last good keys of an issuer that cannot be
	// reached stay trusted; after it the issuer's tokens are refused until a
	// fetch succeeds. 0 means [DefaultKeysMaxStale].
	MaxStale time.Duration
	// MinRefresh is the shortest time between two fetches caused by tokens
	// naming an unknown key id (so a caller cannot make the verifier hammer
	// the provider); 0 means [DefaultKeysMinRefresh].
	MinRefresh time.Duration
	// HTTPClient fetches discovery documents and key sets; nil means a
	// client with a 10 s timeout.
	HTTPClient *http.Client
	// Logger receives a warning when an issuer's keys cannot be fetched
	// and a note when they can again; nil logs nothing.
	Logger *slog.Logger
}

// Defaults of [Discovery].
const (
	DefaultKeysRefresh    = 5 * time.Minute
	DefaultKeysMaxStale   = time.Hour
	DefaultKeysMinRefresh = 10 * time.Second
)

// maxJWKSBytes bounds a provider's key set answer.
const maxJWKSBytes = 1 << 20

// Reasons an issuer's token is refused before its signature is checked.
var (
	// ErrIssuerNotConfigured: the token's `iss` is none of the configured
	// issuers.
	ErrIssuerNotConfigured = errors.New("the token's issuer is not configured")
	// ErrIssuerKeysStale: the issuer's keys were never fetched, or could
	// not be fetched for longer than the stale bound; its tokens are refused
	// until a fetch succeeds.
	ErrIssuerKeysStale = errors.New("the issuer's keys are unavailable: not fetched within the stale bound")
	// ErrUnknownKeyID: the token names a key the issuer does not publish.
	ErrUnknownKeyID = errors.New("unknown key id")
)

// NewOIDCVerifier returns a verifier of tokens from the configured OpenID
// providers. Every issuer is discovered and its keys fetched before it
// returns; an issuer that cannot be reached is logged and its tokens are
// refused until a fetch succeeds (one customer's provider being down never
// stops the service), but if no issuer can be reached it is an error. The
// keys are then refreshed every d.Refresh until ctx ends, and at once (at
// most every d.MinRefresh) when a token names an unknown key id. cfg.JWKS
// and cfg.Issuer are not used; cfg.Audience is the audience of issuers that
// name none.
func NewOIDCVerifier(ctx context.Context, cfg VerifierConfig, d Discovery) (*Verifier, error) {
	if err := ValidateIssuers(d.Issuers, cfg.PlatformTenant); err != nil {
		return nil, fmt.Errorf("principal: %w", err)
	}
	if d.Refresh == 0 {
		d.Refresh = DefaultKeysRefresh
	}
	if d.MaxStale == 0 {
		d.MaxStale = DefaultKeysMaxStale
	}
	if d.MinRefresh == 0 {
		d.MinRefresh = DefaultKeysMinRefresh
	}
	if d.Refresh < 0 || d.MaxStale < 0 || d.MinRefresh < 0 {
		return nil, errors.New("principal: key refresh intervals must be positive")
	}
	if d.HTTPClient == nil {
		d.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	// A placeholder key set lets NewVerifier check the rest of cfg; the
	// verifier never reads it (signingKeys goes to the issuers).
	cfg.JWKS = []byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`)
	cfg.Issuer = ""
	v, err := NewVerifier(cfg)
	if err != nil {
		return nil, err
	}
	set := &issuerSet{byURL: map[string]*issuerKeys{}, owners: map[string]string{}, d: d, verified: verifiedOIDCCache()}
	errs := make([]error, len(d.Issuers))
	var wg sync.WaitGroup
	for i, is := range d.Issuers {
		k := &issuerKeys{cfg: is, d: d}
		set.byURL[is.URL] = k
		set.order = append(set.order, is.URL)
		if is.Tenant != "" {
			set.owners[is.Tenant] = is.URL
		}
		wg.Go(func() { errs[i] = k.refresh(ctx) })
	}
	wg.Wait()
	if failed := errors.Join(errs...); failed != nil && !slices.Contains(errs, nil) {
		return nil, fmt.Errorf("principal: no issuer could be reached: %w", failed)
	}
	for _, k := range set.byURL {
		go k.loop(ctx)
	}
	v.issuers = set
	return v, nil
}

// Issuers returns the URLs of the configured OpenID providers, in
// configuration order; empty for a verifier of a JWKS file.
func (v *Verifier) Issuers() []string {
	if v.issuers == nil {
		return nil
	}
	return append([]string(nil), v.issuers.order...)
}

// issuerSet is a verifier's trusted providers.
type issuerSet struct {
	byURL  map[string]*issuerKeys
	order  []string
	owners map[string]string // tenant -> URL of the issuer mapped to it
	d      Discovery

	mu       sync.Mutex
	verified *lru.Cache[string, verifiedOIDC]
}

// verifiedOIDC is a remembered verification: it stays true only while the
// key that signed the token is still published and fresh.
type verifiedOIDC struct {
	p   Principal
	iss *issuerKeys
	kid string
}

// issuerKeys is one provider's cached key set.
type issuerKeys struct {
	cfg Issuer
	d   Discovery
	sf  singleflight.Group

	mu          sync.RWMutex
	keys        jose.JSONWebKeySet
	fetched     time.Time // last successful fetch
	lastAttempt time.Time
	failing     bool // the last fetch failed (logged once per outage)
}

// fetch discovers the provider and reads its key set.
func (k *issuerKeys) fetch(ctx context.Context) (jose.JSONWebKeySet, error) {
	ctx = oidc.ClientContext(ctx, k.d.HTTPClient)
	// NewProvider checks that the discovery document names this issuer
	// exactly (OpenID Connect Discovery 1.0 §4.3).
	p, err := oidc.NewProvider(ctx, k.cfg.URL)
	if err != nil {
		return jose.JSONWebKeySet{}, fmt.Errorf("discovery: %w", err)
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := p.Claims(&doc); err != nil || doc.JWKSURI == "" {
		return jose.JSONWebKeySet{}, errors.New("discovery: no jwks_uri")
	}
	if err := validIssuerURL(doc.JWKSURI); err != nil {
		return jose.JSONWebKeySet{}, fmt.Errorf("discovery: jwks_uri: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, doc.JWKSURI, nil)
	if err != nil {
		return jose.JSONWebKeySet{}, fmt.Errorf("jwks: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.d.HTTPClient.Do(req)
	if err != nil {
		return jose.JSONWebKeySet{}, fmt.Errorf("jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return jose.JSONWebKeySet{}, fmt.Errorf("jwks: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return jose.JSONWebKeySet{}, fmt.Errorf("jwks: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return jose.JSONWebKeySet{}, fmt.Errorf("jwks: larger than %d bytes", maxJWKSBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return jose.JSONWebKeySet{}, fmt.Errorf("jwks: %w", err)
	}
	var public jose.JSONWebKeySet
	for _, key := range set.Keys {
		// Keys for encryption and private keys are never signing keys.
		if key.IsPublic() && key.Use != "enc" {
			public.Keys = append(public.Keys, key)
		}
	}
	if len(public.Keys) == 0 {
		return jose.JSONWebKeySet{}, errors.New("jwks: no public signing key")
	}
	return public, nil
}

// refresh fetches the keys once (concurrent callers share one fetch) and
// keeps them if the fetch succeeded; on failure the last good set stays.
func (k *issuerKeys) refresh(ctx context.Context) error {
	_, err, _ := k.sf.Do("", func() (any, error) {
		k.mu.Lock()
		k.lastAttempt = time.Now()
		k.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		set, err := k.fetch(ctx)
		k.mu.Lock()
		defer k.mu.Unlock()
		if err != nil {
			if !k.failing {
				k.d.Logger.Warn("cannot fetch the keys of an OpenID provider; its last good keys stay trusted until the stale bound",
					"issuer", k.cfg.URL, "error", err, "last_good", k.fetched, "max_stale", k.d.MaxStale)
			}
			k.failing = true
			return nil, err
		}
		if k.failing {
			k.d.Logger.Info("the keys of an OpenID provider are fetched again", "issuer", k.cfg.URL)
		}
		k.keys, k.fetched, k.failing = set, time.Now(), false
		return nil, nil
	})
	return err
}

// loop refreshes the keys on schedule until ctx ends.
func (k *issuerKeys) loop(ctx context.Context) {
	t := time.NewTicker(k.d.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = k.refresh(ctx) // a failure keeps the last good set; lookup bounds its age
		}
	}
}

// lookup returns the keys that may have signed a token naming kid (every
// key when kid is empty). A key id the set lacks triggers one refresh if
// the last attempt is older than MinRefresh; keys older than MaxStale are
// refused (after one more attempt, under the same rate limit).
func (k *issuerKeys) lookup(kid string) ([]jose.JSONWebKey, error) {
	keys, stale, refetch := k.current(kid)
	if (stale || len(keys) == 0) && refetch {
		_ = k.refresh(context.Background())
		keys, stale, _ = k.current(kid)
	}
	if stale {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, ErrIssuerKeysStale)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, ErrUnknownKeyID)
	}
	return keys, nil
}

// current reads the cached keys for kid, whether they are past the stale
// bound, and whether the rate limit allows a fetch now.
func (k *issuerKeys) current(kid string) (keys []jose.JSONWebKey, stale, refetch bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	now := time.Now()
	keys = k.keys.Keys
	if kid != "" {
		keys = k.keys.Key(kid)
	}
	return keys, now.Sub(k.fetched) > k.d.MaxStale, now.Sub(k.lastAttempt) >= k.d.MinRefresh
}

// trusts reports whether the key kid is still published and fresh, without
// fetching.
func (k *issuerKeys) trusts(kid string) bool {
	keys, stale, _ := k.current(kid)
	return !stale && len(keys) > 0
}

// signingKeys returns the keys that may have signed tok, and the issuer
// whose token it claims to be (nil for a verifier of a JWKS file). The
// issuer is chosen by the unverified `iss`; the signature check against
// that issuer's keys, and the `iss` check after it, make the choice sound.
func (v *Verifier) signingKeys(tok *jwt.JSONWebToken) ([]jose.JSONWebKey, *issuerKeys, error) {
	kid := tok.Headers[0].KeyID
	if v.issuers == nil {
		keys := v.keys.Keys
		if kid != "" {
			keys = v.keys.Key(kid)
			if len(keys) == 0 {
				// The kid is the caller's: quoted only when short.
				if len(kid) > maxQuotedKeyID {
					return nil, nil, fmt.Errorf("%w: unknown key id (%d bytes)", ErrInvalidToken, len(kid))
				}
				return nil, nil, fmt.Errorf("%w: unknown key id %q", ErrInvalidToken, kid)
			}
		}
		return keys, nil, nil
	}
	var unverified struct {
		Issuer string `json:"iss"`
	}
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	is, ok := v.issuers.byURL[unverified.Issuer]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidToken, ErrIssuerNotConfigured)
	}
	keys, err := is.lookup(kid)
	if err != nil {
		return nil, nil, err
	}
	return keys, is, nil
}

// issuerClaims applies the token's issuer to its claims: the tenant and
// groups come from the issuer's claim names, and the tenant must be one the
// issuer may act for. payload is the verified payload of tok.
func (v *Verifier) applyIssuer(is *issuerKeys, tok *jwt.JSONWebToken, exp *jwt.Expected, extra *extraClaims) error {
	if is == nil {
		return nil
	}
	var payload json.RawMessage
	// The signature was checked against this issuer's key before this
	// call; the payload read here is the verified one.
	if err := tok.UnsafeClaimsWithoutVerification(&payload); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	c, err := parseIssuerClaims(is.cfg, payload)
	if err != nil {
		return err
	}
	tenant, err := issuerTenant(is.cfg, c, v.issuers.owners, v.cfg.PlatformTenant)
	if err != nil {
		return err
	}
	extra.Tenant, extra.Groups = tenant, c.groups
	exp.Issuer = is.cfg.URL
	aud := is.cfg.Audience
	if aud == "" {
		aud = v.cfg.Audience
	}
	exp.AnyAudience = jwt.Audience{aud}
	return nil
}

// verifyOIDC is [Verifier.Verify] for a verifier of OpenID providers: a
// remembered result is reused only while the key that signed the token is
// still published by its issuer and the issuer's keys are fresh, so a
// removed key or an issuer past its stale bound ends the token at once.
func (v *Verifier) verifyOIDC(token string) (Principal, error) {
	s := v.issuers
	r, ok := s.verified.Get(token)
	if ok {
		if v.now().Before(r.p.ExpiresAt.Add(v.cfg.Leeway)) && r.iss.trusts(r.kid) {
			return r.p, nil
		}
		s.verified.Remove(token)
	}
	p, err := v.verify(token)
	if err != nil {
		return Principal{}, err
	}
	// verify succeeded, so the token parses and names a configured issuer.
	tok, _ := jwt.ParseSigned(token, algorithms)
	var claims struct {
		Issuer string `json:"iss"`
	}
	_ = tok.UnsafeClaimsWithoutVerification(&claims)
	r = verifiedOIDC{p: p, iss: s.byURL[claims.Issuer], kid: tok.Headers[0].KeyID}
	if r.iss == nil || r.kid == "" {
		// Without a key id the signing key cannot be told apart later, so
		// the result is not remembered.
		return p, nil
	}
	s.verified.Add(token, r)
	return p, nil
}

// verifiedOIDCCache is the bounded LRU of remembered verifications
// ([verifiedCacheSize] tokens; the least recently used is forgotten).
func verifiedOIDCCache() *lru.Cache[string, verifiedOIDC] {
	c, _ := lru.New[string, verifiedOIDC](verifiedCacheSize)
	return c
}
