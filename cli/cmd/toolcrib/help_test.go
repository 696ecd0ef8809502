package main

import (
	"bytes"
	"context"
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
