package config

import (
	"flag"
	"fmt"
	"slices"
)

// Lookup reads one environment variable: os.LookupEnv, or a test's map.
type Lookup = func(string) (string, bool)

// Flags registers every flag of a service on a new Set (built with
// [NewSet] over lookup), writing the parsed values into c. Each service has
// one such function; [Parse], [Usage] and [Describe] are built on it.
type Flags[C any] func(c *C, lookup Lookup) *Set

// Validated is a service configuration (a pointer to it) that reports every
// problem with itself at once.
type Validated[C any] interface {
	*C
	Validate() error
}

// noEnv is the empty environment: help text and descriptions show the
// defaults, never what the process environment happens to hold.
func noEnv(string) (string, bool) { return "", false }

// Parse reads a service's configuration from args (flags) and lookup (the
// environment; nil means os.LookupEnv): flag, then environment variable,
// then default. It reports every malformed value at once, then every
// problem [Validated.Validate] finds; -h gives flag.ErrHelp.
func Parse[C any, P Validated[C]](args []string, lookup Lookup, flags Flags[C]) (C, error) {
	var c C
	if err := flags(&c, lookup).Parse(args); err != nil {
		return c, err
	}
	return c, P(&c).Validate()
}

// Usage returns the help text of a service's flags, with the defaults.
func Usage[C any](flags Flags[C]) string {
	var c C
	return flags(&c, noEnv).Usage()
}

// Flag describes one flag: what docs/ tables and help show.
type Flag struct {
	// Name is the flag's name without dashes, e.g. `listen`.
	Name string
	// Env is the environment variable that backs it.
	Env string
	// Default is its default as the flag package prints it (`15m0s`,
	// `true`; empty for an empty string).
	Default string
	// Usage says what it means.
	Usage string
}

// Describe lists a service's flags in the order the service registers them,
// with the defaults (never the process environment's values).
func Describe[C any](flags Flags[C]) []Flag {
	var c C
	return flags(&c, noEnv).Describe()
}

// Describe lists the set's flags in registration order; a flag registered on
// [Set.FlagSet] directly comes after them, in name order, without an env
// twin.
func (s *Set) Describe() []Flag {
	names := slices.Clone(s.order)
	var extra []string
	s.fs.VisitAll(func(f *flag.Flag) {
		if _, ok := s.usage[f.Name]; !ok {
			extra = append(extra, f.Name)
		}
	})
	names = append(names, extra...) // VisitAll visits in name order
	out := make([]Flag, 0, len(names))
	for _, name := range names {
		f := s.fs.Lookup(name)
		usage, ok := s.usage[name]
		if !ok {
			usage = f.Usage
		}
		out = append(out, Flag{Name: name, Env: s.envs[name], Default: f.DefValue, Usage: usage})
	}
	return out
}

// Problems returns the function a Validate method reports a problem with:
// each call appends one error naming the flag (`--flag: message`) to errs,
// which the method joins at the end.
func Problems(errs *[]error) func(flagName, format string, args ...any) {
	return func(flagName, format string, args ...any) {
		*errs = append(*errs, fmt.Errorf("--%s: %s", flagName, fmt.Sprintf(format, args...)))
	}
}
