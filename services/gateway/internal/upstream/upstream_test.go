package upstream

import (
	"strings"
	"testing"
)

// A stdio server is keyed by its command line (discovery's identity
// digest), apart from any URL, and with its credential.
func TestStdioTargetIdentity(t *testing.T) {
	a := Target{Command: "/usr/bin/inv", Args: []string{"-stdio"}}
	b := Target{Command: "/usr/bin/inv", Args: []string{"-stdio", "-page-size", "3"}}
	u := Target{URL: "http://127.0.0.1:7301/mcp"}
	if a.Identity() == b.Identity() || a.Identity() == u.Identity() || !strings.HasPrefix(a.Identity(), "stdio:sha256:") || u.Identity() != u.URL {
		t.Fatalf("identities %q %q %q", a.Identity(), b.Identity(), u.Identity())
	}
	if keyOf(Target{URL: u.URL, Credential: "one"}) == keyOf(Target{URL: u.URL, Credential: "two"}) {
		t.Fatal("two credentials share a session")
	}
	// The environment is platform/stdio's (TestEnvCarriesOnlyWhatAProgramNeeds).
}
