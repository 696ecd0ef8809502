package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/tlsconfig/tlstest"
)

// TestVerifyFull: a service's pool on a Postgres with `ssl = on` (a
// throwaway cluster, TLS only, a password) connects with
// sslmode=verify-full and the CA that signed the server certificate, over
// TLS; it is refused with another CA, under a host name the certificate
// does not name, without TLS, and with a wrong password; no error shows
// the password.
func TestVerifyFull(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "postgres")
	caFile := ca.WriteCA(t, dir, "postgres-ca")
	otherCAFile := tlstest.NewCA(t, "other").WriteCA(t, dir, "other-ca")
	certFile, keyFile := ca.Issue(t, tlstest.Leaf{CommonName: "postgres-server", Server: true, Hosts: []string{"localhost"}}).Write(t, dir, "postgres-server")
	srv := pgtest.StartTLSServer(t, certFile, keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ping := func(url string) error {
		pool, err := postgres.Open(ctx, url, "probe")
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var ssl bool
		if err := pool.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil {
			return err
		}
		if !ssl {
			t.Fatalf("%s: connected without TLS", url)
		}
		return nil
	}
	good := srv.URL("localhost", "sslmode=verify-full&sslrootcert="+caFile)
	if err := ping(good); err != nil {
		t.Fatalf("verify-full with the right CA: %v\n%s", err, srv.Log())
	}
	for _, tc := range []struct {
		name, url, want string
	}{
		{"another CA", srv.URL("localhost", "sslmode=verify-full&sslrootcert="+otherCAFile), "certificate signed by unknown authority"},
		{"wrong host name", srv.URL("127.0.0.1", "sslmode=verify-full&sslrootcert="+caFile), "doesn't contain any IP SANs"},
		{"plaintext", srv.URL("localhost", "sslmode=disable"), "no encryption"},
		{"wrong password", strings.Replace(good, srv.Password, "not-the-password", 1), "password authentication failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ping(tc.url)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), srv.Password) || strings.Contains(err.Error(), "not-the-password") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}
