package main

import (
	"log/slog"
	"os"
	"testing"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/services/admission"
	"github.com/toolcrib/toolcrib/services/registry"
)

// TestDevUpLogFlagsReachEveryService: `dev up --log-level debug
// --access-log` gives the services it launches (their configurations parsed
// from the environment) that level and the access log; a level that is not
// one is refused by the service's own validation.
func TestDevUpLogFlagsReachEveryService(t *testing.T) {
	for _, k := range []string{config.EnvName("log-level"), config.EnvName("access-log")} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	a, err := admission.ParseConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.LogLevel != slog.LevelInfo || a.AccessLog {
		t.Fatalf("without the flags: level %v, access log %v; want INFO, off", a.LogLevel, a.AccessLog)
	}
	if err := devLogFlags("debug", true); err != nil {
		t.Fatal(err)
	}
	a, err = admission.ParseConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := registry.ParseConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]config.Common{"admission": a.Common, "registry": r.Common} {
		if c.LogLevel != slog.LevelDebug || !c.AccessLog {
			t.Fatalf("%s: level %v, access log %v; want DEBUG, on", name, c.LogLevel, c.AccessLog)
		}
	}
	if err := devLogFlags("loud", false); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.ParseConfig(nil, nil); err == nil {
		t.Fatal("registry accepted --log-level loud")
	}
}
