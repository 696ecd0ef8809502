package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
)

// Asking for help, in any of its spellings, prints the usage on stdout and
// exits 0; a missing or unknown command prints it on stderr and exits 1.
func TestHelpExitsZero(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // on stdout
	}{
		{[]string{"--help"}, "Usage: toolcrib [global flags]"},
		{[]string{"-h"}, "Usage: toolcrib [global flags]"},
		{[]string{"-help"}, "Usage: toolcrib [global flags]"},
		{[]string{"help"}, "Usage: toolcrib [global flags]"},
		{[]string{"--json", "--help"}, "Usage: toolcrib [global flags]"},
		{[]string{"help", "discovery", "scan"}, "Usage: toolcrib discovery scan"},
		{[]string{"discovery", "scan", "--help"}, "Usage: toolcrib discovery scan"},
		{[]string{"discovery", "scan", "-h"}, "-wait"},
		{[]string{"server", "register", "-h"}, "Usage: toolcrib server register"},
		{[]string{"check", "-h"}, "-run-id"},
		{[]string{"help", "visible"}, "Usage: toolcrib visible [flags]"},
		{[]string{"--help"}, "-admission"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errOut)
		if code := exitCode(err); code != 0 {
			t.Errorf("toolcrib %s: exit %d (%v), want 0", strings.Join(tc.args, " "), code, err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("toolcrib %s: stdout lacks %q:\n%s", strings.Join(tc.args, " "), tc.want, out.String())
		}
		if errOut.Len() != 0 {
			t.Errorf("toolcrib %s: wrote to stderr:\n%s", strings.Join(tc.args, " "), errOut.String())
		}
	}
	for _, args := range [][]string{{}, {"no-such-command"}, {"--no-such-flag"}, {"discovery", "scan", "--no-such-flag"}} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, &out, &errOut)
		if code := exitCode(err); code != 1 {
			t.Errorf("toolcrib %s: exit %d, want 1", strings.Join(args, " "), code)
		}
		if len(args) > 0 && !strings.Contains(errOut.String(), "Usage: toolcrib") {
			t.Errorf("toolcrib %s: stderr lacks the usage:\n%s", strings.Join(args, " "), errOut.String())
		}
	}
}

// Go-style single-dash long flags (`-json`, `-wait`) still parse, as before
// the CLI was built on cobra; one-letter shorthands, unknown names and
// anything after `--` are left alone. Global flags before the command are
// the global ones even where the command has a flag of that name.
func TestGoStyleFlagsAndGlobalsBeforeTheCommand(t *testing.T) {
	e := &env{}
	root, err := newRoot(e, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want []string }{
		{[]string{"-json", "discovery", "scan", "-wait", "-audience=a.b", "s", "--", "-wait"},
			[]string{"--json", "discovery", "scan", "--wait", "--audience=a.b", "s", "--", "-wait"}},
		{[]string{"apply", "-f", "r.yaml", "-prune"}, []string{"apply", "-f", "r.yaml", "--prune"}},
		{[]string{"visible", "-bogus", "-h"}, []string{"visible", "-bogus", "-h"}},
	} {
		if got := singleDashLongFlags(root, c.in); !slices.Equal(got, c.want) {
			t.Errorf("singleDashLongFlags(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	rest, err := takeGlobalFlags(root, []string{"--lease", "127.0.0.1:9", "--json", "--help", "lease", "verify", "--lease", "tok"})
	if err != nil || !slices.Equal(rest, []string{"--help", "lease", "verify", "--lease", "tok"}) || e.leaseAddr != "127.0.0.1:9" || !e.asJSON {
		t.Fatalf("takeGlobalFlags: %q %v; lease address %q, json %v", rest, err, e.leaseAddr, e.asJSON)
	}
	if _, err := takeGlobalFlags(root, []string{"--timeout", "soon", "health"}); err == nil {
		t.Fatal("--timeout soon was taken")
	}
}
