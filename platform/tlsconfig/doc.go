// Package tlsconfig builds the TLS configuration of every toolcrib listener
// and every outgoing gRPC client from PEM files named by flags
// (--tls-cert-file, --tls-key-file, --tls-client-ca-file, --tls-ca-file,
// --tls-client-cert-file, --tls-client-key-file, --tls-min-version).
//
// Certificates, keys and CAs are re-read when their files change, so a
// certificate rotated on disk (cert-manager, SPIRE) is served to, or
// presented on, new connections without a restart; connections already open
// keep their session. Files are checked at most once per
// [Options.CheckInterval] (5s), on the next handshake. Files that do not load
// at start are a configuration error; a rotation that does not load keeps
// the last good material and logs a warning.
//
// With no file configured, [Server] is nil and [Client.TransportCredentials]
// of a nil [Client] is plaintext: TLS is opt-in in this release.
package tlsconfig
