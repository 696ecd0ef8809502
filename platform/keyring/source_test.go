package keyring

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func sources(t *testing.T) map[string]func() Source {
	return map[string]func() Source{
		"File":   func() Source { return NewFile(filepath.Join(t.TempDir(), "lease-keys.json")) },
		"Memory": func() Source { return &Memory{} },
	}
}

// TestSourceContract is the Source contract; File and the Memory fake both
// pass it.
func TestSourceContract(t *testing.T) {
	ctx := context.Background()
	for name, open := range sources(t) {
		t.Run(name, func(t *testing.T) {
			src := open()
			if ks, err := src.Keys(ctx); err != nil || len(ks) != 0 {
				t.Fatalf("empty source: %v, %d keys", err, len(ks))
			}
			a, err := src.Create(ctx, t0)
			if err != nil {
				t.Fatal(err)
			}
			b, err := src.Create(ctx, t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if a.ID == "" || a.ID == b.ID || !a.CreatedAt.Equal(t0) || !a.RetiredAt.IsZero() {
				t.Fatalf("created %+v and %+v", a, b)
			}
			sig, err := a.Signer.Sign(nil, []byte("payload"), crypto.Hash(0))
			if err != nil || !ed25519.Verify(a.Public, []byte("payload"), sig) {
				t.Fatalf("the signer does not sign with the public key: %v", err)
			}
			if err := src.Retire(ctx, a.ID, t0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if err := src.Retire(ctx, a.ID, t0.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			ks, _ := src.Keys(ctx)
			got := byID(ks)
			if len(ks) != 2 || !got[a.ID].RetiredAt.Equal(t0.Add(time.Minute)) || !got[b.ID].RetiredAt.IsZero() {
				t.Fatalf("after retire: %+v", ks)
			}
			if !got[a.ID].Public.Equal(a.Public) {
				t.Fatal("a stored key changed")
			}
			if err := src.Destroy(ctx, a.ID); err != nil {
				t.Fatal(err)
			}
			ks, _ = src.Keys(ctx)
			if len(ks) != 1 || ks[0].ID != b.ID {
				t.Fatalf("after destroy: %+v", ks)
			}
			if err := src.Retire(ctx, a.ID, t0); !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("Retire of a destroyed key = %v", err)
			}
			if err := src.Destroy(ctx, a.ID); !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("Destroy of a destroyed key = %v", err)
			}
		})
	}
}

func byID(ks []Key) map[string]Key {
	m := map[string]Key{}
	for _, k := range ks {
		m[k.ID] = k
	}
	return m
}

func TestFileRefusesAMalformedKeyFile(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"not JSON":     `keys`,
		"short seed":   `{"keys":[{"kid":"a","seed":"AAAA","created_at":"2026-12-01T10:00:00Z"}]}`,
		"no kid":       `{"keys":[{"seed":"` + strings.Repeat("A", 43) + `","created_at":"2026-12-01T10:00:00Z"}]}`,
		"repeated kid": `{"keys":[{"kid":"a","seed":"` + strings.Repeat("A", 43) + `"},{"kid":"a","seed":"` + strings.Repeat("A", 43) + `"}]}`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := NewFile(path).Keys(context.Background()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
