package stdio

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
)

func TestCommandDigestKeepsArgumentBoundaries(t *testing.T) {
	a, b := CommandDigest("x", []string{"a b"}), CommandDigest("x", []string{"a", "b"})
	if a == b || !strings.HasPrefix(a, "sha256:") || CommandDigest("x", nil) == CommandDigest("x", []string{""}) {
		t.Fatalf("digests %q %q", a, b)
	}
	// Pinned: a change of the identity would quarantine every stdio server
	// discovery has pinned.
	if got := CommandDigest("inv", []string{"-stdio"}); got != "sha256:"+sha256hex(`["inv","-stdio"]`) {
		t.Fatalf("CommandDigest = %s", got)
	}
}

func TestEnvCarriesOnlyWhatAProgramNeeds(t *testing.T) {
	t.Setenv("TOOLCRIB_SECRET_OTHER_CLASS", "must-not-leak")
	t.Setenv("TOOLCRIB_POSTGRES_URL", "postgres://service")
	t.Setenv("PATH", "/usr/bin")
	env := Env(CredentialEnv, "class-credential")
	for _, kv := range env {
		if strings.HasPrefix(kv, "TOOLCRIB_SECRET") || strings.HasPrefix(kv, "TOOLCRIB_POSTGRES") {
			t.Fatalf("the service's environment reached the stdio server: %v", env)
		}
	}
	if !slices.Contains(env, "PATH=/usr/bin") || !slices.Contains(env, CredentialEnv+"=class-credential") {
		t.Fatalf("environment %v", env)
	}
	if slices.ContainsFunc(Env(CredentialEnv, ""), func(kv string) bool { return strings.HasPrefix(kv, CredentialEnv+"=") }) {
		t.Fatal("an empty credential was passed")
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
