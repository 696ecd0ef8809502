package crawl

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"

	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/stdio"
)

// ErrIdentityMismatch is wrapped by the TLS handshake error when the server
// presents a key other than the pinned one (or, within one scan, another key
// than it presented first).
var ErrIdentityMismatch = errors.New("crawl: server identity does not match")

// SPKIDigest returns `sha256:<hex>` of a certificate's SubjectPublicKeyInfo
// (the identity of an https server).
func SPKIDigest(rawSubjectPublicKeyInfo []byte) string {
	sum := sha256.Sum256(rawSubjectPublicKeyInfo)
	return canonical.DigestPrefix + hex.EncodeToString(sum[:])
}

// CommandDigest returns `sha256:<hex>` of the canonical JSON array
// [command, args...] (the endpoint digest of a stdio server; its identity
// is [stdio.Hasher.Identity], which also covers what the command runs).
func CommandDigest(command string, args []string) string { return stdio.CommandDigest(command, args) }

// URLDigest returns `sha256:<hex>` of the URL text (the identity of a plain
// http server, and the endpoint digest of every HTTP server).
func URLDigest(u string) string { return canonical.DigestBytes([]byte(u)) }

// identity tracks the TLS identity observed during one session: the first
// handshake fixes it, every later handshake must present the same key, and
// every handshake must match the pin when there is one.
type identity struct {
	pin string

	mu       sync.Mutex
	observed string
	mismatch string // the offending digest, when one was seen
}

func (id *identity) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: no certificate", ErrIdentityMismatch)
	}
	got := SPKIDigest(cs.PeerCertificates[0].RawSubjectPublicKeyInfo)
	id.mu.Lock()
	defer id.mu.Unlock()
	switch {
	case id.pin != "" && got != id.pin:
		id.mismatch = got
		return fmt.Errorf("%w: presented %s, pinned %s", ErrIdentityMismatch, got, id.pin)
	case id.observed != "" && got != id.observed:
		id.mismatch = got
		return fmt.Errorf("%w: presented %s, earlier in this scan %s", ErrIdentityMismatch, got, id.observed)
	}
	id.observed = got
	return nil
}

func (id *identity) state() (observed, mismatch string) {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.observed, id.mismatch
}

// loopback reports whether a URL's host is a loopback address or
// `localhost`.
func loopback(u *url.URL) bool {
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// redactURL returns u without user information, for details and logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	return u.String()
}
