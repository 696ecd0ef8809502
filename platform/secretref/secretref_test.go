package secretref_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/platform/secretref"
)

func TestCheckAndResolveConfine(t *testing.T) {
	base := t.TempDir()
	secrets := filepath.Join(base, "secrets")
	dev := filepath.Join(base, ".toolcrib", "dev")
	for _, d := range []string{secrets, dev, filepath.Join(secrets, "sub")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	const admin = "ADMIN-TOKEN-VALUE"
	write := func(p, v string) {
		if err := os.WriteFile(p, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dev, "admin-token"), admin)
	write(filepath.Join(secrets, "upstream"), "up-1")
	write(filepath.Join(secrets, "sub", "nested"), "up-2")
	// A symlink inside the directory pointing out of it, and one inside.
	if err := os.Symlink(filepath.Join(dev, "admin-token"), filepath.Join(secrets, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/nested", filepath.Join(secrets, "inside")); err != nil {
		t.Fatal(err)
	}
	p := secretref.Policy{Dirs: []string{secrets}, EnvPrefixes: []string{"TOOLCRIB_SECRET_"}}
	env := map[string]string{"TOOLCRIB_SECRET_A": "env-a", "TOOLCRIB_POSTGRES_URL": "postgres://x"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	for ref, want := range map[string]string{
		"":                      "",
		"env:TOOLCRIB_SECRET_A": "env-a",
		"file:" + filepath.Join(secrets, "upstream"): "up-1",
		"file:" + filepath.Join(secrets, "inside"):   "up-2",
	} {
		if err := p.Check(ref); err != nil {
			t.Errorf("Check(%q): %v", ref, err)
		}
		if got, err := p.Resolve(ref, lookup); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	for ref, rule := range map[string]secretref.Rule{
		"file:" + filepath.Join(dev, "admin-token"):         secretref.RuleOutsideDirs,
		"file:" + filepath.Join(secrets, "escape"):          secretref.RuleOutsideDirs,
		"file:" + secrets + "/../.toolcrib/dev/admin-token": secretref.RuleSyntax,
		"file:" + secrets:                           secretref.RuleOutsideDirs,
		"file:relative/path":                        secretref.RuleSyntax,
		"env:TOOLCRIB_POSTGRES_URL":                 secretref.RuleEnvPrefix,
		"env:HOME":                                  secretref.RuleEnvPrefix,
		"env:TOOLCRIB_SECRET_UNSET":                 secretref.RuleUnavailable,
		"file:" + filepath.Join(secrets, "missing"): secretref.RuleUnavailable,
		"vault:kv/a":                                secretref.RuleSyntax,
		"sk-live-" + admin:                          secretref.RuleSyntax,
	} {
		_, err := p.Resolve(ref, lookup)
		re := secretref.Refused(err)
		if re == nil || re.Rule != rule {
			t.Errorf("Resolve(%q): %v, want rule %s", ref, err, rule)
			continue
		}
		if strings.Contains(err.Error(), admin) || strings.Contains(err.Error(), "kv/a") || strings.Contains(err.Error(), "POSTGRES") {
			t.Errorf("Resolve(%q): the error shows the value: %v", ref, err)
		}
	}
	// The zero policy refuses everything but no reference.
	if err := (secretref.Policy{}).Check("env:TOOLCRIB_SECRET_A"); secretref.Refused(err) == nil {
		t.Fatal("the zero policy allowed an env: reference")
	}
}

// TestResolveRefusesASymlinkPlacedAfterCheck: a reference accepted when it
// was written (the registry's Check) whose path later becomes a symlink out
// of the directory is refused when discovery reads it, never followed.
func TestResolveRefusesASymlinkPlacedAfterCheck(t *testing.T) {
	base := t.TempDir()
	secrets, outside := filepath.Join(base, "secrets"), filepath.Join(base, "outside")
	for _, d := range []string{secrets, outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "token"), []byte("OUTSIDE"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := secretref.Policy{Dirs: []string{secrets}}
	ref := "file:" + filepath.Join(secrets, "dir", "token")
	if err := p.Check(ref); err != nil { // does not exist yet: lexically fine
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(secrets, "dir")); err != nil {
		t.Fatal(err)
	}
	v, err := p.Resolve(ref, nil)
	if re := secretref.Refused(err); re == nil || re.Rule != secretref.RuleOutsideDirs || v != "" {
		t.Fatalf("Resolve = %q, %v; want rule %s", v, err, secretref.RuleOutsideDirs)
	}
}

func TestConfig(t *testing.T) {
	p, err := (&secretref.Config{Dirs: "/run/secrets, /etc/toolcrib/secrets", EnvPrefixes: "TOOLCRIB_SECRET_,MCP_"}).Policy()
	if err != nil || len(p.Dirs) != 2 || len(p.EnvPrefixes) != 2 {
		t.Fatalf("%+v %v", p, err)
	}
	_, err = (&secretref.Config{Dirs: "relative,/", EnvPrefixes: "BAD-PREFIX"}).Policy()
	if err == nil || strings.Count(err.Error(), "--secret-dirs") != 2 || !strings.Contains(err.Error(), "--secret-env-prefixes") {
		t.Fatalf("%v", err)
	}
}
