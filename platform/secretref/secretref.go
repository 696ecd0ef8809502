package secretref

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"

	"github.com/toolcrib/toolcrib/platform/config"
)

// Rule names why a reference is refused.
type Rule string

// The rules; [RefusedError.Rule] is one of them.
const (
	// RuleSyntax: not `env:NAME` or `file:/absolute/clean/path`.
	RuleSyntax Rule = "syntax"
	// RuleEnvPrefix: the variable has no configured prefix.
	RuleEnvPrefix Rule = "env-prefix"
	// RuleOutsideDirs: the file is not inside a configured directory
	// (after resolving symlinks).
	RuleOutsideDirs Rule = "outside-secret-dirs"
	// RuleUnavailable: allowed, but there is no value (unset variable,
	// missing or empty file).
	RuleUnavailable Rule = "unavailable"
)

var explain = map[Rule]string{
	RuleSyntax:      "must be env:NAME or file:/absolute/path",
	RuleEnvPrefix:   "env: references may name only variables with a --secret-env-prefixes prefix",
	RuleOutsideDirs: "file: references must resolve (after symlinks) inside a --secret-dirs directory",
	RuleUnavailable: "the referenced variable or file has no value",
}

// RefusedError says a reference is refused. Scheme is `env`, `file` or
// empty; the value is never kept.
type RefusedError struct {
	Rule   Rule
	Scheme string
}

func (e *RefusedError) Error() string {
	what := "the secret reference"
	if e.Scheme != "" {
		what = "the " + e.Scheme + ": secret reference"
	}
	return fmt.Sprintf("%s is refused (rule %s: %s; the value is not shown)", what, e.Rule, explain[e.Rule])
}

// Description is the text of a field violation: the rule, never the value.
func (e *RefusedError) Description() string {
	return fmt.Sprintf("refused, rule %s: %s; the value given is not shown, in case it is a credential", e.Rule, explain[e.Rule])
}

// Refused returns the refusal in err's chain, or nil.
func Refused(err error) *RefusedError {
	var re *RefusedError
	if errors.As(err, &re) {
		return re
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

const maxPath = 4096

// Policy confines secret references. The zero value refuses every
// reference.
type Policy struct {
	// Dirs are absolute directories `file:` references may resolve into.
	Dirs []string
	// EnvPrefixes are the prefixes `env:` variable names must have.
	EnvPrefixes []string
}

// Check checks ref without reading a value: syntax, the env prefix, and
// that the file path is inside a directory, lexically and, when the path
// exists here, after resolving symlinks. The empty reference (no
// credential) is allowed.
func (p Policy) Check(ref string) error {
	if ref == "" {
		return nil
	}
	if name, ok := strings.CutPrefix(ref, "env:"); ok {
		if !envName.MatchString(name) {
			return &RefusedError{Rule: RuleSyntax, Scheme: "env"}
		}
		for _, pre := range p.EnvPrefixes {
			if strings.HasPrefix(name, pre) {
				return nil
			}
		}
		return &RefusedError{Rule: RuleEnvPrefix, Scheme: "env"}
	}
	if file, ok := strings.CutPrefix(ref, "file:"); ok {
		if !strings.HasPrefix(file, "/") || path.Clean(file) != file || len(file) > maxPath ||
			strings.ContainsFunc(file, unicode.IsControl) {
			return &RefusedError{Rule: RuleSyntax, Scheme: "file"}
		}
		if _, _, ok := p.dirOf(file); !ok {
			return &RefusedError{Rule: RuleOutsideDirs, Scheme: "file"}
		}
		// Where the file exists on this machine, its resolved path must stay
		// inside the resolved directory too.
		if real, err := filepath.EvalSymlinks(file); err == nil && !p.resolvedInside(real) {
			return &RefusedError{Rule: RuleOutsideDirs, Scheme: "file"}
		}
		return nil
	}
	return &RefusedError{Rule: RuleSyntax}
}

// dirOf returns the configured directory file is lexically inside and the
// path relative to it.
func (p Policy) dirOf(file string) (dir, rel string, ok bool) {
	for _, d := range p.Dirs {
		if r, err := filepath.Rel(d, file); err == nil && r != "." && filepath.IsLocal(r) {
			return d, r, true
		}
	}
	return "", "", false
}

func (p Policy) resolvedInside(real string) bool {
	for _, d := range p.Dirs {
		rd, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		if r, err := filepath.Rel(rd, real); err == nil && r != "." && filepath.IsLocal(r) {
			return true
		}
	}
	return false
}

// maxSecret bounds the bytes read from a secret file.
const maxSecret = 64 << 10

// Resolve checks ref and returns its value, trimmed. lookup reads the
// environment. A file is opened through an [os.Root] on its directory, so
// a symlink (or `..` placed by a race) that leaves the directory is
// refused by the kernel-side walk, never followed.
func (p Policy) Resolve(ref string, lookup func(string) (string, bool)) (string, error) {
	if ref == "" {
		return "", nil
	}
	if err := p.Check(ref); err != nil {
		return "", err
	}
	if name, ok := strings.CutPrefix(ref, "env:"); ok {
		v, ok := lookup(name)
		if v = strings.TrimSpace(v); !ok || v == "" {
			return "", &RefusedError{Rule: RuleUnavailable, Scheme: "env"}
		}
		return v, nil
	}
	dir, rel, _ := p.dirOf(strings.TrimPrefix(ref, "file:"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", &RefusedError{Rule: RuleUnavailable, Scheme: "file"}
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		// os.Root reports a walk out of the directory as "path escapes from
		// parent" (its error value is not exported).
		if strings.Contains(err.Error(), "escapes") {
			return "", &RefusedError{Rule: RuleOutsideDirs, Scheme: "file"}
		}
		return "", &RefusedError{Rule: RuleUnavailable, Scheme: "file"}
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", &RefusedError{Rule: RuleUnavailable, Scheme: "file"}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecret))
	v := strings.TrimSpace(string(b))
	if err != nil || v == "" {
		return "", &RefusedError{Rule: RuleUnavailable, Scheme: "file"}
	}
	return v, nil
}

// Config is the policy as flags: --secret-dirs and --secret-env-prefixes
// (comma-separated), with environment twins TOOLCRIB_SECRET_DIRS and
// TOOLCRIB_SECRET_ENV_PREFIXES.
type Config struct {
	// Dirs is the comma-separated list of [Policy.Dirs].
	Dirs string
	// EnvPrefixes is the comma-separated list of [Policy.EnvPrefixes].
	EnvPrefixes string
}

// DefaultEnvPrefix is the default of --secret-env-prefixes.
const DefaultEnvPrefix = "TOOLCRIB_SECRET_"

// Register adds the flags to s.
func (c *Config) Register(s *config.Set) {
	s.String(&c.Dirs, "secret-dirs", "", "",
		"comma-separated absolute directories file: secret references may resolve into (after symlinks); empty refuses file: references")
	s.String(&c.EnvPrefixes, "secret-env-prefixes", "", DefaultEnvPrefix,
		"comma-separated prefixes the variables of env: secret references must have; empty refuses env: references")
}

// Policy parses the flags; errors name the flag.
func (c *Config) Policy() (Policy, error) {
	var p Policy
	var errs []error
	for _, d := range split(c.Dirs) {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d || d == "/" {
			errs = append(errs, fmt.Errorf("--secret-dirs: %q must be a clean absolute directory other than /", d))
			continue
		}
		p.Dirs = append(p.Dirs, d)
	}
	for _, pre := range split(c.EnvPrefixes) {
		if !envName.MatchString(pre) {
			errs = append(errs, fmt.Errorf("--secret-env-prefixes: %q is not the start of a variable name", pre))
			continue
		}
		p.EnvPrefixes = append(p.EnvPrefixes, pre)
	}
	return p, errors.Join(errs...)
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
