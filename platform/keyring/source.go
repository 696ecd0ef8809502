package keyring

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"time"
)

// Key is one signing key as a [Source] holds it.
type Key struct {
	// ID is the key id (`kid`), unique within the source.
	ID string
	// Public is the public key.
	Public ed25519.PublicKey
	// Signer signs with the private key; a KMS-backed source calls out to
	// the KMS and never returns the key itself. Sign is called with the
	// bytes to sign and crypto.Hash(0).
	Signer crypto.Signer
	// CreatedAt is when the key was made.
	CreatedAt time.Time
	// RetiredAt is when it stopped signing new tokens; zero while it may
	// still sign.
	RetiredAt time.Time
}

// ErrUnknownKey is returned for a key id the source does not hold.
var ErrUnknownKey = errors.New("keyring: unknown key id")

// Source holds signing keys. Every implementation passes the contract tests
// of this package (sourceContract).
//
//   - Keys returns every key the source holds, current and retired, in any
//     order; an empty source returns none and no error.
//   - Create makes a new Ed25519 key with CreatedAt at and RetiredAt zero,
//     stores it, and returns it; other keys are unchanged.
//   - Retire sets the key's RetiredAt to at if it is zero (retiring twice
//     keeps the first time); ErrUnknownKey if the source has no such key.
//   - Destroy removes the key for good; ErrUnknownKey if it has none.
//
// A source shared by several replicas (one key file on shared storage, one
// KMS key ring) lets each replica see the others' rotations on its next
// [Ring.Refresh].
type Source interface {
	Keys(ctx context.Context) ([]Key, error)
	Create(ctx context.Context, at time.Time) (Key, error)
	Retire(ctx context.Context, id string, at time.Time) error
	Destroy(ctx context.Context, id string) error
}
