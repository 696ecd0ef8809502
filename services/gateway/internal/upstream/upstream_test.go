package upstream

import (
	"slices"
	"strings"
	"testing"
)

// A stdio server is keyed by its command line (discovery's identity
// digest), apart from any URL; its environment holds only what a program
// needs and the class's credential, never the gateway's own.
func TestStdioTargetIdentityAndEnvironment(t *testing.T) {
	a := Target{Command: "/usr/bin/inv", Args: []string{"-stdio"}}
	b := Target{Command: "/usr/bin/inv", Args: []string{"-stdio", "-page-size", "3"}}
	u := Target{URL: "http://127.0.0.1:7301/mcp"}
	if a.Identity() == b.Identity() || a.Identity() == u.Identity() || !strings.HasPrefix(a.Identity(), "stdio:sha256:") || u.Identity() != u.URL {
		t.Fatalf("identities %q %q %q", a.Identity(), b.Identity(), u.Identity())
	}
	// Arguments are not joined: ["a b"] is not ["a", "b"].
	if CommandDigest("x", []string{"a b"}) == CommandDigest("x", []string{"a", "b"}) {
		t.Fatal("argument boundaries are lost in the identity")
	}
	if keyOf(Target{URL: u.URL, Credential: "one"}) == keyOf(Target{URL: u.URL, Credential: "two"}) {
		t.Fatal("two credentials share a session")
	}
	t.Setenv("TOOLCRIB_SECRET_OTHER_CLASS", "must-not-leak")
	t.Setenv("TOOLCRIB_POSTGRES_URL", "postgres://gateway")
	t.Setenv("PATH", "/usr/bin")
	env := stdioEnv(CredentialEnv, "class-credential")
	for _, kv := range env {
		if strings.HasPrefix(kv, "TOOLCRIB_SECRET") || strings.HasPrefix(kv, "TOOLCRIB_POSTGRES") {
			t.Fatalf("the gateway's environment reached the stdio server: %v", env)
		}
	}
	if !slices.Contains(env, "PATH=/usr/bin") || !slices.Contains(env, CredentialEnv+"=class-credential") {
		t.Fatalf("environment %v", env)
	}
	if slices.ContainsFunc(stdioEnv(CredentialEnv, ""), func(kv string) bool { return strings.HasPrefix(kv, CredentialEnv+"=") }) {
		t.Fatal("an empty credential was passed")
	}
}
