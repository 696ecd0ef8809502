package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/tlsconfig"
)

// clientTLS is the CLI's transport security: TLS verifying the services
// against the CA in caFile (the dev CA by default), presenting the client
// certificate when one is configured or found (mTLS), or plaintext with
// --plaintext.
type clientTLS struct {
	caFile, certFile, keyFile string
	plaintext                 bool
	// creds is built on first use.
	creds credentials.TransportCredentials
}

// registerTLSFlags adds the CLI's TLS flags to gs.
func registerTLSFlags(gs *config.Set, t *clientTLS) {
	gs.String(&t.caFile, tlsconfig.FlagCAFile, "", devCAFile,
		"PEM CAs the services' certificates are verified against; the default (the dev CA that toolcrib dev up makes) is looked for in this directory and every parent")
	gs.String(&t.certFile, tlsconfig.FlagClientCertFile, "", devClientCertFile,
		"PEM client certificate presented to services that require one (mTLS); the default is looked for like --tls-ca-file")
	gs.String(&t.keyFile, tlsconfig.FlagClientKeyFile, "", devClientKeyFile, "PEM private key of --tls-client-cert-file")
	gs.Bool(&t.plaintext, "plaintext", "", false, "call the services without TLS (an explicit opt-out: tokens cross the network in the clear)")
}

// errPlaintextWithTLSFiles is returned for --plaintext with a TLS file named.
var errPlaintextWithTLSFiles = errors.New("--plaintext calls without TLS; it takes no --tls-ca-file, --tls-client-cert-file or --tls-client-key-file")

// resolve finds the default files upward from the working directory and
// checks the combination. With no CA and no client certificate found or
// named, the CLI calls in plaintext (no dev CA exists: no `dev up` ran here).
func (t *clientTLS) resolve() error {
	if t.plaintext {
		if t.caFile != devCAFile || t.certFile != devClientCertFile || t.keyFile != devClientKeyFile {
			return errPlaintextWithTLSFiles
		}
		t.caFile, t.certFile, t.keyFile = "", "", ""
		return nil
	}
	if t.caFile == devCAFile {
		t.caFile = existingUpward(devCAFile)
	}
	if t.certFile == devClientCertFile && t.keyFile == devClientKeyFile {
		t.certFile, t.keyFile = existingUpward(devClientCertFile), existingUpward(devClientKeyFile)
		if t.certFile == "" || t.keyFile == "" {
			t.certFile, t.keyFile = "", ""
		}
	}
	if (t.certFile == "") != (t.keyFile == "") {
		return fmt.Errorf("--%s and --%s go together", tlsconfig.FlagClientCertFile, tlsconfig.FlagClientKeyFile)
	}
	return nil
}

// existingUpward is findUpward's path when the file exists, else empty.
func existingUpward(rel string) string {
	p := findUpward(rel)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// transport returns the credentials of every connection the CLI makes.
func (t *clientTLS) transport() (credentials.TransportCredentials, error) {
	if t.creds != nil {
		return t.creds, nil
	}
	c, err := tlsconfig.NewClient(tlsconfig.Options{CAFile: t.caFile, ClientCertFile: t.certFile, ClientKeyFile: t.keyFile},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	t.creds = c.TransportCredentials()
	return t.creds, nil
}

// tlsMismatchHint explains a call that failed because the CLI and the
// service disagree on TLS; empty for any other error.
func (t *clientTLS) tlsMismatchHint(err error) string {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return ""
	}
	msg := st.Message()
	switch {
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the service speaks plaintext and this CLI TLS (" + t.describe() + "); start the service with TLS, or pass --plaintext (TOOLCRIB_PLAINTEXT) to call it without"
	case t.caFile == "" && t.certFile == "" && (strings.Contains(msg, "server preface") || strings.Contains(msg, "EOF")):
		why := "no dev CA (" + devCAFile + ") here or in any parent directory and no --tls-ca-file; pass --tls-ca-file (TOOLCRIB_TLS_CA_FILE), or run from the directory `toolcrib dev up` runs in"
		if t.plaintext {
			why = "--plaintext; call it without --plaintext (the dev CA is trusted by default)"
		}
		return "the service may speak TLS and this CLI called in plaintext: " + why
	case strings.Contains(msg, "certificate required"):
		return "the service requires a client certificate (mTLS); pass --tls-client-cert-file and --tls-client-key-file (the dev ones are " + devClientCertFile + " and " + devClientKeyFile + ")"
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return "the service's certificate is not signed by a CA in " + t.caFile + "; pass the CA that signed it with --tls-ca-file"
	}
	return ""
}

// describe names the CLI's TLS files, for messages.
func (t *clientTLS) describe() string {
	if t.caFile == "" {
		return "system CAs"
	}
	return "CA " + t.caFile
}
