package tlsconfig

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Client is the TLS material of a service's outgoing gRPC clients: the CAs
// servers are verified against and the certificate presented under mTLS.
type Client struct {
	min   uint16
	roots *watched[*x509.CertPool] // nil: the system roots
	pair  *watched[*tls.Certificate]
}

// NewClient loads the clients' CAs and certificate. It returns nil and no
// error when o configures no client TLS: clients dial in plaintext. A file
// that does not load is an error naming its flag.
func NewClient(o Options, logger *slog.Logger) (*Client, error) {
	if !o.ClientEnabled() {
		return nil, nil
	}
	if logger == nil {
		logger = slog.Default()
	}
	c := &Client{min: o.version()}
	var err error
	if o.CAFile != "" {
		if c.roots, err = loadPool(o, logger, FlagCAFile, o.CAFile); err != nil {
			return nil, err
		}
	}
	if o.ClientCertFile != "" {
		if c.pair, err = loadPair(o, logger, FlagClientCertFile, o.ClientCertFile, o.ClientKeyFile); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// TransportCredentials is the one constructor of every outgoing gRPC
// client's transport security: plaintext when c is nil (no client TLS
// configured), otherwise TLS verifying the server against the current CAs
// and presenting the current client certificate, both re-read for each new
// connection.
func (c *Client) TransportCredentials() credentials.TransportCredentials {
	if c == nil {
		return insecure.NewCredentials()
	}
	return &clientCreds{c: c}
}

// Config returns the configuration of one new connection.
func (c *Client) Config() *tls.Config {
	cfg := &tls.Config{MinVersion: c.min}
	if c.roots != nil {
		cfg.RootCAs = c.roots.get()
	}
	if c.pair != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return c.pair.get(), nil
		}
	}
	return cfg
}

// clientCreds builds grpc's TLS credentials afresh for each handshake, so
// a rotated CA bundle or client certificate is used by the next connection.
type clientCreds struct {
	c          *Client
	serverName string
}

func (cc *clientCreds) creds() credentials.TransportCredentials {
	cfg := cc.c.Config()
	cfg.ServerName = cc.serverName
	return credentials.NewTLS(cfg)
}

func (cc *clientCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return cc.creds().ClientHandshake(ctx, authority, conn)
}

var errClientOnly = errors.New("tlsconfig: client credentials cannot accept connections")

func (cc *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errClientOnly
}

func (cc *clientCreds) Info() credentials.ProtocolInfo { return cc.creds().Info() }

func (cc *clientCreds) Clone() credentials.TransportCredentials {
	return &clientCreds{c: cc.c, serverName: cc.serverName}
}

// OverrideServerName is part of grpc's interface (deprecated there).
func (cc *clientCreds) OverrideServerName(name string) error {
	cc.serverName = name
	return nil
}

// DialTLSContext dials addr with TLS from [Client.Config] (the current CAs
// and client certificate, re-read for each new connection, as the gRPC
// clients do), verifying the server's name against addr's host. It is the
// http.Transport.DialTLSContext of a service's HTTPS client to the other
// toolcrib services (HTTP/1.1: a custom TLS dial turns off net/http's
// HTTP/2).
func (c *Client) DialTLSContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cfg := c.Config()
	cfg.ServerName = host
	cfg.NextProtos = []string{"http/1.1"}
	d := tls.Dialer{Config: cfg}
	return d.DialContext(ctx, network, addr)
}
