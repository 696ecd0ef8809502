package sessionpool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/platform/egress"
)

// A stdio server is keyed by its command line (discovery's identity
// digest), apart from any URL, and with its credential.
func TestStdioTargetIdentity(t *testing.T) {
	a := Target{Command: "/usr/bin/inv", Args: []string{"-stdio"}}
	b := Target{Command: "/usr/bin/inv", Args: []string{"-stdio", "-page-size", "3"}}
	u := Target{URL: "http://127.0.0.1:7301/mcp"}
	if a.Identity() == b.Identity() || a.Identity() == u.Identity() || !strings.HasPrefix(a.Identity(), "stdio:sha256:") || u.Identity() != u.URL {
		t.Fatalf("identities %q %q %q", a.Identity(), b.Identity(), u.Identity())
	}
	if keyOf(Target{URL: u.URL, Credential: "one"}) == keyOf(Target{URL: u.URL, Credential: "two"}) {
		t.Fatal("two credentials share a session")
	}
	// The environment is platform/stdio's (TestEnvCarriesOnlyWhatAProgramNeeds).
}

// An answer larger than MaxMessageBytes fails the call with ErrTooLarge,
// as SSE (the SDK's event bound) and as JSON (limitJSON): never a
// truncated result and never an unbounded read into the gateway's memory.
// One just under the bound (over the 16 MiB the SDK documents as its
// default) arrives whole.
func TestMessageBound(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "big", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				N int `json:"n"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("z", in.N)}}}, nil
		})
	for _, jsonResponse := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonResponse), func(t *testing.T) {
			srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
				&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: jsonResponse}))
			defer srv.Close()
			p := New(egress.Policy{AllowLoopback: true}, nil, nil)
			defer p.Close()
			p.MaxMessageBytes = MessageBytesFor(10 << 20) // 21 MiB
			target := Target{URL: srv.URL}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			n := 18 << 20
			res, err := p.Call(ctx, target, &mcp.CallToolParams{Name: "big", Arguments: map[string]any{"n": n}})
			if err != nil {
				t.Fatalf("%d bytes under the bound: %v", n, err)
			}
			if got := len(res.Content[0].(*mcp.TextContent).Text); got != n {
				t.Fatalf("got %d bytes of %d", got, n)
			}
			_, err = p.Call(ctx, target, &mcp.CallToolParams{Name: "big", Arguments: map[string]any{"n": 22 << 20}})
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("over the bound: %v, want ErrTooLarge", err)
			}
		})
	}
}

// A stdio target is keyed by its content identity when it has one (two
// contents behind one command line are two sessions), and BeforeStart
// refuses the start: its error is returned and no process runs.
func TestStdioBeforeStartRefusesTheStart(t *testing.T) {
	a := Target{Command: "/usr/bin/inv", Args: []string{"-stdio"}, ContentIdentity: "sha256:" + strings.Repeat("a", 64)}
	b := a
	b.ContentIdentity = "sha256:" + strings.Repeat("b", 64)
	if a.Identity() == b.Identity() {
		t.Fatal("two contents behind one command line share a session")
	}
	marker := filepath.Join(t.TempDir(), "started")
	refused := errors.New("identity changed")
	p := New(egress.Policy{}, nil, nil)
	defer p.Close()
	_, err := p.Session(context.Background(), Target{Command: "sh", Args: []string{"-c", "touch " + marker},
		BeforeStart: func() error { return refused }})
	if !errors.Is(err, refused) {
		t.Fatalf("Session: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the process was started")
	}
}
