package upstream

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/platform/egress"
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

// A stdio target is keyed by its content identity when it has one (two
// contents behind one command line are two sessions), and BeforeStart
// refuses the start: its error is returned and no process runs.
func TestStdioBeforeStartRefusesTheStart(t *testing.T) {
	a := Target{Command: "/usr/bin/inv", Args: []string{"-stdio"}, ContentIdentity: "sha256:" + strings.Repeat("a", 64)}
	b := a
	b.ContentIdentity = "sha256:" + strings.Repeat("b", 64)
	if a.Identity() == b.Identity() {
		t.Fatal("two contents behind one command line share a session")
	}
	marker := filepath.Join(t.TempDir(), "started")
	refused := errors.New("identity changed")
	p := New(egress.Policy{}, nil, nil)
	defer p.Close()
	_, err := p.Session(context.Background(), Target{Command: "sh", Args: []string{"-c", "touch " + marker},
		BeforeStart: func() error { return refused }})
	if !errors.Is(err, refused) {
		t.Fatalf("Session: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the process was started")
	}
}
