package tlsconfig

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"
)

// Options are the TLS files and settings of one service, as the flags give
// them (platform/config.Common holds them).
type Options struct {
	// CertFile and KeyFile are the listeners' certificate chain and key
	// (PEM). Empty: the listeners are plaintext.
	CertFile, KeyFile string
	// ClientCAFile holds the CAs (PEM) that sign client certificates: the
	// gRPC listener then requires a client certificate and verifies it
	// against them (mTLS). Empty: no client certificate is asked for.
	ClientCAFile string
	// MinVersion is the lowest TLS version accepted and offered: `1.3`
	// (empty means 1.3) or `1.2`.
	MinVersion string
	// CAFile holds the CAs (PEM) that outgoing gRPC clients verify servers
	// against. Empty with a client certificate: the system roots.
	CAFile string
	// ClientCertFile and ClientKeyFile are the certificate and key outgoing
	// gRPC clients present (mTLS).
	ClientCertFile, ClientKeyFile string
	// CheckInterval is how often, at most, the files are checked for a
	// change; 0 means [DefaultCheckInterval]. Not a flag.
	CheckInterval time.Duration
}

// DefaultCheckInterval is how often, at most, certificate files are checked
// for a change unless configured otherwise. A rotated certificate is served
// within this interval of being written.
const DefaultCheckInterval = 5 * time.Second

// Flag names, for configuration errors.
const (
	FlagCertFile       = "tls-cert-file"
	FlagKeyFile        = "tls-key-file"
	FlagClientCAFile   = "tls-client-ca-file"
	FlagMinVersion     = "tls-min-version"
	FlagCAFile         = "tls-ca-file"
	FlagClientCertFile = "tls-client-cert-file"
	FlagClientKeyFile  = "tls-client-key-file"
)

// ErrVersion is returned for a --tls-min-version other than 1.2 or 1.3.
var ErrVersion = errors.New("must be 1.2 or 1.3")

// ParseVersion maps a --tls-min-version value to a crypto/tls version.
func ParseVersion(v string) (uint16, error) {
	switch v {
	case "", "1.3":
		return tls.VersionTLS13, nil
	case "1.2":
		return tls.VersionTLS12, nil
	}
	return 0, ErrVersion
}

// ServerEnabled reports whether the listeners serve TLS.
func (o Options) ServerEnabled() bool { return o.CertFile != "" || o.KeyFile != "" }

// ClientEnabled reports whether outgoing gRPC clients use TLS.
func (o Options) ClientEnabled() bool {
	return o.CAFile != "" || o.ClientCertFile != "" || o.ClientKeyFile != ""
}

// Validate reports every problem with the combination of settings through
// bad (platform/config.Problems); it reads no file.
func (o Options) Validate(bad func(flagName, format string, args ...any)) {
	if _, err := ParseVersion(o.MinVersion); err != nil {
		bad(FlagMinVersion, "%.20q %v", o.MinVersion, err)
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		bad(FlagCertFile, "--%s and --%s go together", FlagCertFile, FlagKeyFile)
	}
	if o.ClientCAFile != "" && o.CertFile == "" {
		bad(FlagClientCAFile, "needs --%s and --%s: client certificates are asked for only over TLS", FlagCertFile, FlagKeyFile)
	}
	if (o.ClientCertFile == "") != (o.ClientKeyFile == "") {
		bad(FlagClientCertFile, "--%s and --%s go together", FlagClientCertFile, FlagClientKeyFile)
	}
}

func (o Options) version() uint16 {
	v, _ := ParseVersion(o.MinVersion)
	if v == 0 {
		v = tls.VersionTLS13
	}
	return v
}

func (o Options) interval() time.Duration {
	if o.CheckInterval > 0 {
		return o.CheckInterval
	}
	return DefaultCheckInterval
}

// fileError names the flag whose file did not load.
func fileError(flagName string, err error) error {
	return fmt.Errorf("--%s: %w", flagName, err)
}
