package discoverytest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// StdioSpec describes the catalog the mcpstdio test server serves.
type StdioSpec struct {
	// Tools, PageSize and Revision make the catalog (see [Catalog]).
	Tools    []json.RawMessage `json:"tools"`
	PageSize int               `json:"page_size"`
	Revision string            `json:"revision"`
	// Versions restricts the protocol versions; empty means all.
	Versions []string `json:"versions,omitempty"`
	// TokenEnv and Token: when TokenEnv is set the server exits unless the
	// variable holds Token.
	TokenEnv string `json:"token_env,omitempty"`
	Token    string `json:"token,omitempty"`
	// EnvFile, when set, receives the server's environment, one per line.
	EnvFile string `json:"env_file,omitempty"`
	// ChangeFile, when set, is watched: once it exists the server serves
	// ChangedTools at ChangedRevision and sends
	// `notifications/tools/list_changed` (a change at the source, made by
	// the test at a moment of its choosing).
	ChangeFile      string            `json:"change_file,omitempty"`
	ChangedTools    []json.RawMessage `json:"changed_tools,omitempty"`
	ChangedRevision string            `json:"changed_revision,omitempty"`
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// StdioServer builds the mcpstdio test server once per test process and
// returns the command and arguments that run it with spec.
func StdioServer(t testing.TB, spec StdioSpec) (command string, args []string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "discoverytest-stdio-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "mcpstdio")
		out, err := exec.Command("go", "build", "-o", buildPath, "github.com/toolcrib/toolcrib/services/discovery/discoverytest/cmd/mcpstdio").CombinedOutput()
		if err != nil {
			buildErr = &buildError{out: string(out), err: err}
		}
	})
	if buildErr != nil {
		t.Fatalf("build mcpstdio: %v", buildErr)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return buildPath, []string{path}
}

// Cleanup removes the built test server; call it from TestMain after the
// tests ran.
func Cleanup() {
	if buildPath != "" {
		_ = os.RemoveAll(filepath.Dir(buildPath))
	}
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }
