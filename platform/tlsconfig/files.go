package tlsconfig

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// watched is a value parsed from files and re-parsed when their content
// changes, checked at most once per interval, on use. A change that does
// not parse keeps the last good value and is logged once.
type watched[T any] struct {
	paths    []string
	parse    func(contents [][]byte) (T, error)
	interval time.Duration
	logger   *slog.Logger
	what     string
	now      func() time.Time

	mu       sync.Mutex
	checked  time.Time
	current  [][]byte
	rejected [][]byte // the last content that did not parse
	problem  string   // the last problem logged, until the files load again
	value    T
}

// load reads and parses the files once; an error is a configuration error.
func load[T any](what string, interval time.Duration, logger *slog.Logger, parse func([][]byte) (T, error), paths ...string) (*watched[T], error) {
	w := &watched[T]{paths: paths, parse: parse, interval: interval, logger: logger, what: what, now: time.Now}
	contents, err := w.read()
	if err != nil {
		return nil, err
	}
	v, err := parse(contents)
	if err != nil {
		return nil, err
	}
	w.value, w.current, w.checked = v, contents, w.now()
	return w, nil
}

func (w *watched[T]) read() ([][]byte, error) {
	out := make([][]byte, len(w.paths))
	for i, p := range w.paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// get returns the current value, re-reading the files first when the
// interval has passed since the last check.
func (w *watched[T]) get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if now.Sub(w.checked) < w.interval {
		return w.value
	}
	w.checked = now
	contents, err := w.read()
	if err != nil {
		w.reject(nil, err)
		return w.value
	}
	if same(contents, w.current) {
		w.problem = ""
		return w.value
	}
	if same(contents, w.rejected) {
		return w.value
	}
	v, err := w.parse(contents)
	if err != nil {
		w.reject(contents, err)
		return w.value
	}
	w.value, w.current, w.rejected, w.problem = v, contents, nil, ""
	w.logger.Info("tls: reloaded", "what", w.what, "files", w.paths)
	return w.value
}

// reject logs a change that did not load: once per content that does not
// parse, once per problem reading the files (a missing file is not logged
// at every check).
func (w *watched[T]) reject(contents [][]byte, err error) {
	if contents == nil && err.Error() == w.problem {
		return
	}
	w.problem = err.Error()
	if contents != nil {
		w.rejected = contents
	}
	w.logger.Warn("tls: changed files do not load; keeping the last good "+w.what, "files", w.paths, "error", err)
}

func same(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// parseKeyPair parses a certificate chain and its key; the leaf is parsed
// too (tls.Certificate.Leaf).
func parseKeyPair(c [][]byte) (*tls.Certificate, error) {
	pair, err := tls.X509KeyPair(c[0], c[1])
	if err != nil {
		return nil, err
	}
	return &pair, nil
}

// errNoCertificates is returned for a CA file without a PEM certificate.
var errNoCertificates = errors.New("no PEM certificate in the file")

// parsePool parses a CA bundle.
func parsePool(c [][]byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c[0]) {
		return nil, errNoCertificates
	}
	return pool, nil
}

func loadPair(o Options, logger *slog.Logger, certFlag, certFile, keyFile string) (*watched[*tls.Certificate], error) {
	w, err := load("certificate", o.interval(), logger, parseKeyPair, certFile, keyFile)
	if err != nil {
		return nil, fileError(certFlag, fmt.Errorf("certificate %s with key %s: %w", certFile, keyFile, err))
	}
	return w, nil
}

func loadPool(o Options, logger *slog.Logger, flagName, file string) (*watched[*x509.CertPool], error) {
	w, err := load("CA bundle", o.interval(), logger, parsePool, file)
	if err != nil {
		return nil, fileError(flagName, fmt.Errorf("%s: %w", file, err))
	}
	return w, nil
}
