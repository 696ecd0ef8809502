package keys

import (
	"context"
	"time"

	"github.com/toolcrib/toolcrib/platform/keyring"
	"github.com/toolcrib/toolcrib/revision/lease"
)

// The key source and its implementations are [keyring]'s, shared with
// admission's receipt-signing keys.
type (
	// Source is [keyring.Source].
	Source = keyring.Source
	// Key is [keyring.Key].
	Key = keyring.Key
	// File is [keyring.File].
	File = keyring.File
	// Memory is [keyring.Memory].
	Memory = keyring.Memory
	// Rotation is [keyring.Rotation].
	Rotation = keyring.Rotation
)

// ErrUnknownKey is [keyring.ErrUnknownKey].
var ErrUnknownKey = keyring.ErrUnknownKey

// NewFile is [keyring.NewFile].
func NewFile(path string) *File { return keyring.NewFile(path) }

// Options configure a [Ring].
type Options struct {
	// RotateEvery is the age at which [Ring.Maintain] replaces the current
	// key; 0 disables scheduled rotation.
	RotateEvery time.Duration
	// Skew is the clock-skew allowance verifiers grant on `exp`; a retired
	// key stays published for lease.MaxTTL + Skew + SignLag after its
	// retirement.
	Skew time.Duration
	// SignLag is how long another replica sharing the source may still sign
	// with a key after it was retired here (its key-check interval).
	SignLag time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Ring is the lease service's [keyring.Ring]: tokens live at most
// lease.MaxTTL, and it signs lease claims.
type Ring struct {
	*keyring.Ring
	opts Options
}

// NewRing loads the source's keys and, when none may sign, creates one.
func NewRing(ctx context.Context, src Source, opts Options) (*Ring, error) {
	r, err := keyring.NewRing(ctx, src, keyring.Options{Lifetime: lease.MaxTTL, RotateEvery: opts.RotateEvery,
		Skew: opts.Skew, SignLag: opts.SignLag, Now: opts.Now})
	if err != nil {
		return nil, err
	}
	return &Ring{Ring: r, opts: opts}, nil
}

// Sign signs c with the current key.
func (r *Ring) Sign(c lease.Claims) (token, keyID string, err error) {
	k, err := r.Current()
	if err != nil {
		return "", "", err
	}
	tok, err := lease.Sign(lease.SigningKey{ID: k.ID, Signer: k.Signer}, c)
	return tok, k.ID, err
}
