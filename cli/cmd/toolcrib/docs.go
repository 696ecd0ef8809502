package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// cliDocsHeader opens docs/cli/README.md, the index of the generated
// reference.
const cliDocsHeader = `# toolcrib command reference

Generated from the commands themselves by ` + "`make cli-docs`" + ` (cobra's markdown generator);
CI fails when it is stale. Do not edit these files by hand.

Start at [toolcrib](toolcrib.md): the global flags, the commands, and the exit status.
Shell completion: ` + "`toolcrib completion bash|zsh|fish`" + ` prints a script to source, e.g.
` + "`source <(toolcrib completion bash)`" + `.
`

// genDocsCommand is `toolcrib gen-docs <dir>` (hidden): it writes the
// markdown reference of every command into dir. Defaults come from no
// environment, so the reference is the same wherever it is made.
func genDocsCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-docs <dir>",
		Short:  "write the markdown command reference (docs/cli) into a directory",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeCLIDocs(args[0])
		},
	}
}

// writeCLIDocs replaces dir's markdown files with the reference of a root
// built without environment.
func writeCLIDocs(dir string) error {
	root, err := newRoot(&env{}, func(string) (string, bool) { return "", false })
	if err != nil {
		return err
	}
	var stamp func(*cobra.Command)
	stamp = func(c *cobra.Command) {
		c.DisableAutoGenTag = true // no date: the same bytes every time
		for _, s := range c.Commands() {
			stamp(s)
		}
	}
	stamp(root)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return fmt.Errorf("gen-docs: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(strings.TrimLeft(cliDocsHeader, "\n")), 0o644)
}
