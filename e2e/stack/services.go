package stack

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/services/admission"
	"github.com/toolcrib/toolcrib/services/console"
	leasesvc "github.com/toolcrib/toolcrib/services/lease"
)

// The one way whole-suite tests start admission and lease on a [Stack]:
// the worlds (leaseworld, gatewayworld), the drill and the suites build
// their replicas with these, so a change to how a service is started (TLS,
// identity, Redis) is made once.

// noEnv is an environment with no variables: a test's configuration never
// depends on the machine's TOOLCRIB_* variables.
func noEnv(string) (string, bool) { return "", false }

// AdmissionConfig is admission's default configuration against the
// stack's registry and discovery, with its receipt-signing keys in a new
// key file (replicas started from one configuration share their keys, as
// replicas behind one address must).
func (s *Stack) AdmissionConfig(t testing.TB) admission.Config {
	t.Helper()
	c, err := admission.ParseConfig([]string{"--receipt-key-file", filepath.Join(t.TempDir(), "receipt-keys.json")}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	c.RegistryAddr, c.DiscoveryAddr = s.RegistryAddr, s.DiscoveryAddr
	return c
}

// AdmissionDB makes a new, migrated admission database and returns its URL
// (replicas started over one database share its receipts).
func AdmissionDB(t testing.TB) string {
	t.Helper()
	return pgtest.NewDatabase(t, pgtest.Schema{Name: admission.Schema, Sets: admission.Migrations()})
}

// StartAdmission runs an admission replica with cfg over the database at
// db until the test ends, waits until it is SERVING and returns its
// address. cfg's common part (Postgres, Redis, tokens, TLS, a free port)
// is the stack's; edit, when set, changes the configuration last (e.g. a
// reserved ListenAddr, a shared RedisPrefix).
func (s *Stack) StartAdmission(t testing.TB, cfg admission.Config, db string, edit func(*admission.Config)) string {
	t.Helper()
	return s.Auth.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Common = s.Auth.CommonAs(t, "admission", db, true, listening)
		if edit != nil {
			edit(&c)
		}
		return admission.Run(ctx, c)
	})
}

// LeaseConfig is the lease service's default configuration against the
// stack's registry and discovery and the admission at admAddr, with its
// signing keys in keyFile (empty: a new file; replicas sharing one file
// share their keys).
func (s *Stack) LeaseConfig(t testing.TB, admAddr, keyFile string) leasesvc.Config {
	t.Helper()
	if keyFile == "" {
		keyFile = filepath.Join(t.TempDir(), "keys.json")
	}
	c, err := leasesvc.ParseConfig([]string{"--key-file", keyFile}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	c.AdmissionAddr, c.RegistryAddr, c.DiscoveryAddr = admAddr, s.RegistryAddr, s.DiscoveryAddr
	return c
}

// LeaseDB makes a new, migrated lease database and returns its URL.
func LeaseDB(t testing.TB) string {
	t.Helper()
	return pgtest.NewDatabase(t, pgtest.Schema{Name: leasesvc.Schema, Sets: leasesvc.Migrations()})
}

// StartLease runs a lease replica with cfg over the database at db until
// the test ends, waits until it is SERVING and returns its address. edit,
// when set, changes the configuration last (after the stack's common
// part: e.g. Redis through a proxy); the result is validated as main
// validates it.
func (s *Stack) StartLease(t testing.TB, cfg leasesvc.Config, db string, edit func(*leasesvc.Config)) string {
	t.Helper()
	return s.Auth.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Common = s.Auth.CommonAs(t, "lease", db, true, listening)
		if edit != nil {
			edit(&c)
		}
		if err := c.Validate(); err != nil {
			return err
		}
		return leasesvc.Run(ctx, c)
	})
}

// ConsoleConfig is the console's default configuration against the
// stack's registry and discovery and the admission at admAddr: dev
// sign-in on, pages on a free loopback port.
func (s *Stack) ConsoleConfig(t testing.TB, admAddr string) console.Config {
	t.Helper()
	c, err := console.ParseConfig([]string{"--dev-sign-in", "--http-listen", "127.0.0.1:0"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	c.RegistryAddr, c.DiscoveryAddr, c.AdmissionAddr = s.RegistryAddr, s.DiscoveryAddr, admAddr
	return c
}

// StartConsole runs the console with cfg until the test ends, waits until
// it is SERVING and returns its base URL (http://127.0.0.1:port). Its
// common part is the stack's (tokens, TLS, Redis with a prefix of its
// own); it has no service token of its own to present.
func (s *Stack) StartConsole(t testing.TB, cfg console.Config) string {
	t.Helper()
	urls := make(chan string, 1)
	s.Auth.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Common = s.Auth.CommonAs(t, "console", s.PostgresURL, true, listening)
		c.ServiceTokenFile = ""
		c.Ready = func(u string) { urls <- u }
		return console.Run(ctx, c)
	})
	select {
	case u := <-urls:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("the console's pages never listened")
	}
	return ""
}
