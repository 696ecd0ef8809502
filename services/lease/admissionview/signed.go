package admissionview

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/keyring"
	"github.com/toolcrib/toolcrib/platform/signedreceipt"
)

// ErrInvalidReceipt is wrapped by every refusal of a signed receipt that
// does not verify (signed by a key admission does not publish, altered,
// malformed); it wraps signedreceipt.ErrInvalid.
var ErrInvalidReceipt = signedreceipt.ErrInvalid

// KeyFetcher returns admission's published receipt keys.
//
// Fetch returns the key set admission publishes now (GetSigningKeys); an
// error wrapping ErrUnavailable when admission cannot be asked.
type KeyFetcher interface {
	Fetch(ctx context.Context) (keyring.KeySet, error)
}

// AdmissionKeys is the [KeyFetcher] over AdmissionService.GetSigningKeys
// (a public method: no credential is sent).
type AdmissionKeys struct {
	// Client is the admission client.
	Client admissionv1.AdmissionServiceClient
}

// Fetch implements [KeyFetcher].
func (a AdmissionKeys) Fetch(ctx context.Context) (keyring.KeySet, error) {
	resp, err := a.Client.GetSigningKeys(ctx, &admissionv1.GetSigningKeysRequest{})
	if err != nil {
		return keyring.KeySet{}, fmt.Errorf("%w: admission's receipt keys: %s", ErrUnavailable, status.Code(err))
	}
	ks, err := keyring.ParseKeySet(resp.GetJwks())
	if err != nil {
		// Admission answered something that is not a key set: no receipt
		// can be verified against it; refuse rather than guess.
		return keyring.KeySet{}, fmt.Errorf("%w: admission's receipt keys: %v", ErrUnavailable, err)
	}
	return ks, nil
}

// Default timings of [SignedReceipts].
const (
	// DefaultKeyRefreshGap is the shortest time between two fetches made
	// because a receipt named a key not yet seen: receipts with made-up key
	// ids cannot make the lease service hammer admission.
	DefaultKeyRefreshGap = time.Second
	// DefaultKeyMaxAge is how long a fetched key set is used before it is
	// fetched again (a destroyed key leaves it).
	DefaultKeyMaxAge = 5 * time.Minute
)

// SignedReceipts verifies signed receipts locally against admission's
// published keys: fetched once, cached, fetched again when a receipt names
// a key not in the cached set (admission rotated) — at most once per
// RefreshGap — and when the set is MaxAge old. It is safe for concurrent
// use.
type SignedReceipts struct {
	fetch      KeyFetcher
	refreshGap time.Duration
	maxAge     time.Duration
	now        func() time.Time

	// cached is the key set last fetched and when; read without a lock on
	// every Verify, replaced under mu.
	cached atomic.Pointer[fetchedKeys]
	mu     sync.Mutex // held while fetching: one fetch at a time
}

// fetchedKeys is one fetched key set.
type fetchedKeys struct {
	keys keyring.KeySet
	at   time.Time
}

// SignedReceiptsOptions configure [NewSignedReceipts]; zero values are the
// defaults.
type SignedReceiptsOptions struct {
	RefreshGap time.Duration
	MaxAge     time.Duration
	Now        func() time.Time
}

// NewSignedReceipts returns the verifier over fetch.
func NewSignedReceipts(fetch KeyFetcher, o SignedReceiptsOptions) *SignedReceipts {
	if o.RefreshGap <= 0 {
		o.RefreshGap = DefaultKeyRefreshGap
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultKeyMaxAge
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &SignedReceipts{fetch: fetch, refreshGap: o.RefreshGap, maxAge: o.MaxAge, now: o.Now}
}

// Verify returns the decision of the signed receipt: its signed fields and
// valid_until. An error wrapping [ErrInvalidReceipt] when it does not
// verify; one wrapping [ErrUnavailable] when admission's keys cannot be
// had. It does not judge the decision (principal, ALLOW, expiry):
// issuance.Decide does, as for a receipt looked up.
func (s *SignedReceipts) Verify(ctx context.Context, signed string) (Decision, error) {
	ks, err := s.keySet(ctx, false)
	if err != nil {
		return Decision{}, err
	}
	d, err := signedreceipt.Parse(signed, ks)
	if errors.Is(err, signedreceipt.ErrUnknownKey) {
		// Admission may have rotated since the set was fetched.
		if ks, err = s.keySet(ctx, true); err != nil {
			return Decision{}, err
		}
		d, err = signedreceipt.Parse(signed, ks)
	}
	if err != nil {
		return Decision{}, err
	}
	return Decision{Receipt: d.Receipt, ValidUntil: d.ValidUntil}, nil
}

// keySet returns the cached key set, fetching it when there is none, when
// it is maxAge old, or (unknown) when a receipt named a key it lacks and
// the last fetch is refreshGap old. A failed scheduled fetch with a set
// cached keeps the set (its keys are still admission's); a failed fetch for
// an unknown key, or with no set, is the error (the receipt can be neither
// accepted nor called forged).
func (s *SignedReceipts) keySet(ctx context.Context, unknown bool) (keyring.KeySet, error) {
	if ks, ok := s.usable(s.cached.Load(), unknown); ok {
		return ks, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Another call may have fetched while this one waited.
	have := s.cached.Load()
	if ks, ok := s.usable(have, unknown); ok {
		return ks, nil
	}
	now := s.now()
	ks, err := s.fetch.Fetch(ctx)
	if err != nil {
		if have != nil && !unknown {
			return have.keys, nil
		}
		return keyring.KeySet{}, err
	}
	s.cached.Store(&fetchedKeys{keys: ks, at: now})
	return ks, nil
}

// usable returns the keys of f when they may be used without a fetch: f is
// younger than maxAge and, for a receipt naming a key f lacks (unknown),
// younger than refreshGap.
func (s *SignedReceipts) usable(f *fetchedKeys, unknown bool) (keyring.KeySet, bool) {
	if f == nil {
		return keyring.KeySet{}, false
	}
	age := s.now().Sub(f.at)
	if age < s.maxAge && (!unknown || age < s.refreshGap) {
		return f.keys, true
	}
	return keyring.KeySet{}, false
}
