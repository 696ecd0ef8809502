// Package session keeps the console's browser sessions and pending
// sign-ins in Redis: a session id is a random cookie value, stored only as
// its SHA-256, with the user's token, the session's CSRF token and an
// expiry no later than the token's. Sign-out deletes the record; a pending
// OIDC sign-in (state, PKCE verifier, nonce) is read once and deleted.
package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcrib/toolcrib/platform/redisclient"
)

// ErrNotFound: no such session or pending sign-in (never existed, expired,
// signed out, or already used).
var ErrNotFound = errors.New("session: not found")

// Session is one signed-in browser.
type Session struct {
	// Token is the user's bearer token, presented on every call the
	// console makes for this browser.
	Token string `json:"token"`
	// CSRF is the token every form of this session carries.
	CSRF string `json:"csrf"`
	// Expires is when the session ends (no later than the token).
	Expires time.Time `json:"expires"`
}

// Pending is an OIDC sign-in between the redirect to the provider and the
// callback.
type Pending struct {
	// Verifier is the PKCE code verifier (RFC 7636).
	Verifier string `json:"verifier"`
	// Nonce is the OpenID Connect nonce sent with the request.
	Nonce string `json:"nonce"`
}

// Store keeps sessions in Redis.
type Store struct {
	r *redisclient.Client
}

// New returns a store over r.
func New(r *redisclient.Client) *Store { return &Store{r: r} }

// NewID returns a new random identifier (26 base32 characters, 130 bits).
func NewID() string { return rand.Text() }

func (s *Store) key(kind, id string) string {
	h := sha256.Sum256([]byte(id))
	return s.r.Key("console", kind, hex.EncodeToString(h[:]))
}

// Create stores sess under a new id and returns the id; the record expires
// at sess.Expires.
func (s *Store) Create(ctx context.Context, sess Session) (string, error) {
	ttl := time.Until(sess.Expires)
	if ttl <= 0 {
		return "", errors.New("session: already expired")
	}
	b, err := json.Marshal(sess)
	if err != nil {
		return "", err
	}
	id := NewID()
	if err := s.r.Set(ctx, s.key("session", id), b, ttl).Err(); err != nil {
		return "", fmt.Errorf("session: %w", err)
	}
	return id, nil
}

// Get returns the session of id; [ErrNotFound] when there is none.
func (s *Store) Get(ctx context.Context, id string) (Session, error) {
	var sess Session
	if id == "" || len(id) > 64 {
		return sess, ErrNotFound
	}
	b, err := s.r.Get(ctx, s.key("session", id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return sess, ErrNotFound
	}
	if err != nil {
		return sess, fmt.Errorf("session: %w", err)
	}
	if err := json.Unmarshal(b, &sess); err != nil {
		return sess, fmt.Errorf("session: %w", err)
	}
	if !time.Now().Before(sess.Expires) {
		return sess, ErrNotFound
	}
	return sess, nil
}

// Delete ends the session of id (sign-out); ending one that does not
// exist is no error.
func (s *Store) Delete(ctx context.Context, id string) error {
	if id == "" || len(id) > 64 {
		return nil
	}
	return s.r.Del(ctx, s.key("session", id)).Err()
}

// PutPending stores a pending sign-in under state for ttl.
func (s *Store) PutPending(ctx context.Context, state string, p Pending, ttl time.Duration) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.r.Set(ctx, s.key("signin", state), b, ttl).Err()
}

// TakePending returns and deletes the pending sign-in of state: a state is
// good for one callback. [ErrNotFound] when there is none.
func (s *Store) TakePending(ctx context.Context, state string) (Pending, error) {
	var p Pending
	if state == "" || len(state) > 64 {
		return p, ErrNotFound
	}
	b, err := s.r.GetDel(ctx, s.key("signin", state)).Bytes()
	if errors.Is(err, redis.Nil) {
		return p, ErrNotFound
	}
	if err != nil {
		return p, fmt.Errorf("session: %w", err)
	}
	return p, json.Unmarshal(b, &p)
}
