package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"

	"google.golang.org/grpc/credentials"
)

// Server is the TLS material of a service's listeners: its certificate and,
// under mTLS, the CAs its clients' certificates must chain to.
type Server struct {
	min       uint16
	pair      *watched[*tls.Certificate]
	clientCAs *watched[*x509.CertPool]
}

// NewServer loads the listeners' certificate (and client CAs). It returns
// nil and no error when o configures no server certificate: the listeners
// are plaintext. A file that does not load is an error naming its flag.
func NewServer(o Options, logger *slog.Logger) (*Server, error) {
	if !o.ServerEnabled() {
		return nil, nil
	}
	if logger == nil {
		logger = slog.Default()
	}
	pair, err := loadPair(o, logger, FlagCertFile, o.CertFile, o.KeyFile)
	if err != nil {
		return nil, err
	}
	s := &Server{min: o.version(), pair: pair}
	if o.ClientCAFile != "" {
		if s.clientCAs, err = loadPool(o, logger, FlagClientCAFile, o.ClientCAFile); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// MutualTLS reports whether the gRPC listener requires client certificates.
func (s *Server) MutualTLS() bool { return s != nil && s.clientCAs != nil }

// Config returns the listener configuration: every handshake gets the
// current certificate and, when requireClientCert is true and client CAs
// are configured, requires a client certificate that chains to the current
// CAs. nextProtos are the ALPN protocols (`h2` for gRPC; `h2`, `http/1.1`
// for HTTP).
func (s *Server) Config(requireClientCert bool, nextProtos ...string) *tls.Config {
	perClient := func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := &tls.Config{
			MinVersion:   s.min,
			NextProtos:   nextProtos,
			Certificates: []tls.Certificate{*s.pair.get()},
		}
		if requireClientCert && s.clientCAs != nil {
			c.ClientAuth = tls.RequireAndVerifyClientCert
			c.ClientCAs = s.clientCAs.get()
		}
		return c, nil
	}
	return &tls.Config{
		MinVersion: s.min,
		NextProtos: nextProtos,
		// GetConfigForClient decides every handshake; GetCertificate only
		// tells net/http that a certificate is configured.
		GetConfigForClient: perClient,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.pair.get(), nil
		},
	}
}

// GRPC returns the gRPC server credentials: TLS with the current
// certificate, mTLS when client CAs are configured.
func (s *Server) GRPC() credentials.TransportCredentials {
	return credentials.NewTLS(s.Config(true, "h2"))
}
