package keyring

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// File is a [Source] keeping the keys in one JSON file (mode 0600), for
// development and single-host deployments. Writes replace the file
// atomically (write a temporary file, then rename). One process should
// rotate a given file; several processes may read it.
type File struct {
	path string
	mu   sync.Mutex
}

// NewFile returns the source for the key file at path; the file is created
// on the first [File.Create]. Its directory must exist.
func NewFile(path string) *File { return &File{path: path} }

type fileDoc struct {
	Keys []fileKey `json:"keys"`
}

type fileKey struct {
	ID string `json:"kid"`
	// Seed is the 32-byte Ed25519 seed, base64url.
	Seed      string    `json:"seed"`
	CreatedAt time.Time `json:"created_at"`
	RetiredAt time.Time `json:"retired_at,omitzero"`
}

func (f *File) read() ([]fileKey, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("keyring: read %s: %w", f.path, err)
	}
	var doc fileDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("keyring: %s is not a key file: %w", f.path, err)
	}
	seen := map[string]bool{}
	for i, k := range doc.Keys {
		seed, err := base64.RawURLEncoding.DecodeString(k.Seed)
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("keyring: %s: key %d has no Ed25519 seed", f.path, i)
		}
		if k.ID == "" || seen[k.ID] {
			return nil, fmt.Errorf("keyring: %s: key %d has an empty or repeated kid", f.path, i)
		}
		seen[k.ID] = true
	}
	return doc.Keys, nil
}

func (f *File) write(keys []fileKey) error {
	b, err := json.MarshalIndent(fileDoc{Keys: keys}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), ".keys-*")
	if err != nil {
		return fmt.Errorf("keyring: write %s: %w", f.path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("keyring: write %s: %w", f.path, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), f.path)
}

func (k fileKey) key() Key {
	seed, _ := base64.RawURLEncoding.DecodeString(k.Seed)
	priv := ed25519.NewKeyFromSeed(seed)
	return Key{ID: k.ID, Public: priv.Public().(ed25519.PublicKey), Signer: priv, CreatedAt: k.CreatedAt, RetiredAt: k.RetiredAt}
}

// Keys implements [Source].
func (f *File) Keys(context.Context) ([]Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fks, err := f.read()
	if err != nil {
		return nil, err
	}
	out := make([]Key, 0, len(fks))
	for _, k := range fks {
		out = append(out, k.key())
	}
	return out, nil
}

// Create implements [Source].
func (f *File) Create(_ context.Context, at time.Time) (Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fks, err := f.read()
	if err != nil {
		return Key{}, err
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return Key{}, err
	}
	fk := fileKey{Seed: base64.RawURLEncoding.EncodeToString(seed), CreatedAt: at.UTC()}
	fk.ID = keyID(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
	if err := f.write(append(fks, fk)); err != nil {
		return Key{}, err
	}
	return fk.key(), nil
}

// Retire implements [Source].
func (f *File) Retire(_ context.Context, id string, at time.Time) error {
	return f.update(id, func(fks []fileKey, i int) []fileKey {
		if fks[i].RetiredAt.IsZero() {
			fks[i].RetiredAt = at.UTC()
		}
		return fks
	})
}

// Destroy implements [Source].
func (f *File) Destroy(_ context.Context, id string) error {
	return f.update(id, func(fks []fileKey, i int) []fileKey { return append(fks[:i], fks[i+1:]...) })
}

func (f *File) update(id string, edit func([]fileKey, int) []fileKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fks, err := f.read()
	if err != nil {
		return err
	}
	for i := range fks {
		if fks[i].ID == id {
			return f.write(edit(fks, i))
		}
	}
	return fmt.Errorf("%w %q", ErrUnknownKey, id)
}

// keyID is the first 16 bytes of the key's SHA-256 thumbprint, hex: stable
// for the key and unguessable before it exists.
func keyID(pub ed25519.PublicKey) string {
	h := crypto.SHA256.New()
	h.Write(pub)
	return fmt.Sprintf("%x", h.Sum(nil)[:16])
}

// Memory is a [Source] in memory, for tests; it passes the same contract
// tests as [File].
type Memory struct {
	mu   sync.Mutex
	keys []Key
}

// Keys implements [Source].
func (m *Memory) Keys(context.Context) ([]Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Key(nil), m.keys...), nil
}

// Create implements [Source].
func (m *Memory) Create(_ context.Context, at time.Time) (Key, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, err
	}
	k := Key{ID: keyID(pub), Public: pub, Signer: priv, CreatedAt: at.UTC()}
	m.mu.Lock()
	m.keys = append(m.keys, k)
	m.mu.Unlock()
	return k, nil
}

// Retire implements [Source].
func (m *Memory) Retire(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.keys {
		if m.keys[i].ID == id {
			if m.keys[i].RetiredAt.IsZero() {
				m.keys[i].RetiredAt = at.UTC()
			}
			return nil
		}
	}
	return fmt.Errorf("%w %q", ErrUnknownKey, id)
}

// Destroy implements [Source].
func (m *Memory) Destroy(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.keys {
		if m.keys[i].ID == id {
			m.keys = append(m.keys[:i], m.keys[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("%w %q", ErrUnknownKey, id)
}
