package lease

import (
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// TestHeaderCacheIsABoundedLRU: past maxCachedHeaders lease headers the
// least recently used one is forgotten, not every one: a header in use
// (every lease of the current key has it) stays remembered.
func TestHeaderCacheIsABoundedLRU(t *testing.T) {
	put := func(hc *HeaderCache, kid string) string {
		header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","kid":"` + kid + `","typ":"toolcrib-lease+jwt"}`))
		hc.putToken(header+".e30.c2ln", jose.Header{Algorithm: string(jose.EdDSA), KeyID: kid,
			ExtraHeaders: map[jose.HeaderKey]any{jose.HeaderType: "toolcrib-lease+jwt"}})
		return header
	}
	var hc HeaderCache
	first := put(&hc, "first")
	hot := put(&hc, "hot")
	for i := range maxCachedHeaders {
		put(&hc, fmt.Sprintf("k%d", i))
		if i%1000 == 0 {
			if kid, ok := hc.token(hot); !ok || kid != "hot" {
				t.Fatalf("the header in use: %q %v", kid, ok)
			}
		}
	}
	if n := hc.tokens.Len(); n != maxCachedHeaders {
		t.Fatalf("%d headers remembered, want the bound %d", n, maxCachedHeaders)
	}
	if _, ok := hc.token(hot); !ok {
		t.Fatal("the header in use was forgotten")
	}
	if _, ok := hc.token(first); ok {
		t.Fatal("the least recently used header is still remembered past the bound")
	}
}
