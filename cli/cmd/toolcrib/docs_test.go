package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// docs/cli is what `make cli-docs` writes from the commands as they are:
// a changed command, flag or summary without the regenerated reference
// fails here (and in CI).
func TestCLIDocsAreFresh(t *testing.T) {
	fresh := t.TempDir()
	if err := writeCLIDocs(fresh); err != nil {
		t.Fatal(err)
	}
	checkedIn := filepath.Join("..", "..", "..", "docs", "cli")
	want, _ := filepath.Glob(filepath.Join(fresh, "*.md"))
	got, _ := filepath.Glob(filepath.Join(checkedIn, "*.md"))
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	if !slices.Equal(names(want), names(got)) {
		t.Fatalf("docs/cli lists %q, the commands make %q: run `make cli-docs`", names(got), names(want))
	}
	for _, p := range want {
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(checkedIn, filepath.Base(p)))
		if err != nil || string(a) != string(b) {
			t.Errorf("docs/cli/%s is stale (%v): run `make cli-docs`", filepath.Base(p), err)
		}
	}
	if len(want) < 50 {
		t.Fatalf("%d reference pages, want one per command", len(want))
	}
}
