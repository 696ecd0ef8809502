package principal

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Signer mints tokens from a local Ed25519 key. It is for development and
// tests; production tokens come from the operator's identity provider.
type Signer struct {
	key      jose.JSONWebKey
	signer   jose.Signer
	issuer   string
	audience string
	now      func() time.Time
}

// Claims are what a minted token says.
type Claims struct {
	// Subject (`sub`); required.
	Subject string
	// Tenant (`tenant`); platform principals carry the platform tenant.
	Tenant string
	// Groups (`groups`).
	Groups []string
	// TTL is the lifetime; 0 means one hour.
	TTL time.Duration
	// Audience overrides the signer's audience when set.
	Audience string
	// OmitIssuedAt leaves out `iat` (tests of verifiers).
	OmitIssuedAt bool
	// Extra are more claims, by name (e.g. a claim the operator
	// allow-lists for grants' conditions, VerifierConfig.ConditionClaims);
	// a name of a claim set above is ignored.
	Extra map[string]any
}

// NewSigner returns a signer for a private Ed25519 JWK.
func NewSigner(key jose.JSONWebKey, issuer, audience string) (*Signer, error) {
	if key.IsPublic() {
		return nil, errors.New("principal: signer needs a private key")
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	return &Signer{key: key, signer: s, issuer: issuer, audience: audience, now: time.Now}, nil
}

// LoadSigner reads a private JWK from a file.
func LoadSigner(path, issuer, audience string) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("principal: read signing key: %w", err)
	}
	var key jose.JSONWebKey
	if err := json.Unmarshal(b, &key); err != nil {
		return nil, fmt.Errorf("principal: parse signing key: %w", err)
	}
	return NewSigner(key, issuer, audience)
}

// Mint returns a signed compact JWT.
func (s *Signer) Mint(c Claims) (string, error) {
	if c.Subject == "" {
		return "", errors.New("principal: a token needs a subject")
	}
	ttl := c.TTL
	if ttl == 0 {
		ttl = time.Hour
	}
	aud := s.audience
	if c.Audience != "" {
		aud = c.Audience
	}
	now := s.now()
	std := jwt.Claims{
		Subject:  c.Subject,
		Issuer:   s.issuer,
		Audience: jwt.Audience{aud},
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(now.Add(ttl)),
	}
	if c.OmitIssuedAt {
		std.IssuedAt = nil
	}
	b := jwt.Signed(s.signer)
	if len(c.Extra) > 0 {
		b = b.Claims(c.Extra) // first, so the claims below win a clash
	}
	return b.Claims(std).Claims(extraClaims{Tenant: c.Tenant, Groups: c.Groups}).Serialize()
}

// PublicJWKS returns the JWKS with the signer's public key.
func (s *Signer) PublicJWKS() ([]byte, error) {
	return json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{s.key.Public()}})
}

// GenerateKey returns a new private Ed25519 JWK with a thumbprint key id.
func GenerateKey() (jose.JSONWebKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return jose.JSONWebKey{}, err
	}
	key := jose.JSONWebKey{Key: priv, Algorithm: string(jose.EdDSA), Use: "sig"}
	pub := key.Public()
	tp, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return jose.JSONWebKey{}, err
	}
	key.KeyID = fmt.Sprintf("%x", tp[:8])
	return key, nil
}

// DevKeyFiles are the paths [EnsureDevKeys] writes.
type DevKeyFiles struct {
	// SigningKey is the private JWK (mode 0600).
	SigningKey string
	// JWKS is the public key set services verify with.
	JWKS string
}

// EnsureDevKeys creates a development signing key and its JWKS under dir if
// they do not exist yet, and returns their paths.
func EnsureDevKeys(dir string) (DevKeyFiles, error) {
	files := DevKeyFiles{SigningKey: filepath.Join(dir, "signing-key.json"), JWKS: filepath.Join(dir, "jwks.json")}
	if _, err := os.Stat(files.SigningKey); err == nil {
		if _, err := os.Stat(files.JWKS); err == nil {
			return files, nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return files, err
	}
	key, err := GenerateKey()
	if err != nil {
		return files, err
	}
	priv, err := json.MarshalIndent(key, "", "  ")
	if err != nil {
		return files, err
	}
	pub, err := json.MarshalIndent(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}}, "", "  ")
	if err != nil {
		return files, err
	}
	if err := os.WriteFile(files.SigningKey, priv, 0o600); err != nil {
		return files, err
	}
	return files, os.WriteFile(files.JWKS, pub, 0o644)
}

// BearerToken is gRPC per-call credentials sending `authorization: Bearer`.
type BearerToken string

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (t BearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials. It is
// false so loopback development works; production deployments put TLS in
// front.
func (BearerToken) RequireTransportSecurity() bool { return false }

// FileToken is gRPC per-call credentials that send the bearer token stored
// in a file, re-read when the file changes, so a sidecar can rotate it.
type FileToken struct {
	Path string

	mu    sync.Mutex
	mod   time.Time
	token string
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (f *FileToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok, err := f.read()
	if err != nil {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// read returns the file's token, re-reading the file when it changed.
func (f *FileToken) read() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.Path)
	if err != nil {
		return "", fmt.Errorf("principal: token file: %w", err)
	}
	if !st.ModTime().Equal(f.mod) || f.token == "" {
		b, err := os.ReadFile(f.Path)
		if err != nil {
			return "", fmt.Errorf("principal: token file: %w", err)
		}
		f.token = strings.TrimSpace(string(b))
		f.mod = st.ModTime()
	}
	return f.token, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (*FileToken) RequireTransportSecurity() bool { return false }
