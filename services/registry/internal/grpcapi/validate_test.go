package grpcapi

import (
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/egress"
	"github.com/toolcrib/toolcrib/platform/secretref"
)

func TestCheckSecretRef(t *testing.T) {
	sp := secretref.Policy{Dirs: []string{"/run/secrets", "/a"}, EnvPrefixes: []string{"LOGISTICS_", "_x"}}
	ok := []string{"", "env:LOGISTICS_TOKEN", "env:_x1", "file:/run/secrets/logistics", "file:/a/b"}
	bad := []string{"ghp_secretvalue", "env:", "env:1BAD", "env:HAS-DASH", "file:relative", "file:/a/../b", "file:/a//b",
		"file:/a\nb", "vault:kv/x", "ENV:X", " env:X", "env:HOME", "file:/etc/passwd", "file:/a", "file:/run/secretsX/a"}
	for _, ref := range ok {
		var v apierror.Violations
		checkSecretRef(&v, "ref", ref, sp)
		if len(v) != 0 {
			t.Errorf("%q refused: %v", ref, v)
		}
	}
	for _, ref := range bad {
		var v apierror.Violations
		checkSecretRef(&v, "ref", ref, sp)
		if len(v) != 1 {
			t.Errorf("%q accepted", ref)
		} else if val := strings.TrimPrefix(strings.TrimPrefix(ref, "env:"), "file:"); len(val) > 3 && strings.Contains(v[0].Description, val) {
			t.Errorf("description %q shows the reference", v[0].Description)
		}
	}
}

func TestCheckEndpoint(t *testing.T) {
	cases := map[string]bool{
		"https://mcp.example.test/mcp":  true,
		"http://127.0.0.1:8080/mcp":     true,
		"http://[::1]:8080/mcp":         true,
		"http://localhost/mcp":          true,
		"http://mcp.example.test/mcp":   false,
		"https://u:p@mcp.example.test/": false,
		"ftp://mcp.example.test/":       false,
		"mcp.example.test":              false,
		"https:opaque":                  false,
		"":                              false,
		"https://169.254.169.254/x":     false,
		"https://10.0.0.1/mcp":          false,
		"https://mcp.example.test/\x1b": false,
	}
	for raw, want := range cases {
		var v apierror.Violations
		checkEndpoint(&v, "url", raw, egress.Policy{AllowLoopback: true})
		if got := len(v) == 0; got != want {
			t.Errorf("%q accepted=%v, want %v (%v)", raw, got, want, v)
		}
	}
}

func TestPageTokens(t *testing.T) {
	var v apierror.Violations
	p := page(&v, 0, nextToken(true, "logistics"))
	if len(v) != 0 || p.After != "logistics" || p.Limit != defaultPage {
		t.Fatalf("round trip: %+v %v", p, v)
	}
	if p := page(&v, 5000, ""); p.Limit != maxPage {
		t.Fatalf("cap: %+v", p)
	}
	page(&v, -1, "bm9wZQ")
	if len(v) != 2 {
		t.Fatalf("want violations for a negative size and a foreign token, got %v", v)
	}
	if nextToken(false, "x") != "" {
		t.Fatal("a last page has a next token")
	}
}

// Page tokens come back from clients: any string is refused or accepted,
// never a panic, and an accepted one names a non-empty position.
func FuzzPageToken(f *testing.F) {
	f.Add(nextToken(true, "a"))
	f.Add("")
	f.Add("%%%")
	f.Fuzz(func(t *testing.T, token string) {
		var v apierror.Violations
		p := page(&v, 10, token)
		if len(v) == 0 && token != "" && p.After == "" {
			t.Fatalf("accepted %q without a position", token)
		}
	})
}
