package crawl_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/stdio"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

const (
	proven      = catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN
	unversioned = catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION
	incomplete  = catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE
	quarantined = catalogv1.DiscoveryState_DISCOVERY_STATE_QUARANTINED
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func inMemory(t *testing.T, l discoverytest.Lister, o discoverytest.ServerOptions) (crawl.Target, *discoverytest.Server) {
	tr, s := discoverytest.NewInMemory(t, l, o)
	return crawl.Target{Transport: tr, Identity: "sha256:test"}, s
}

// transport names one way of reaching a test server.
type transport struct {
	name   string
	target func(t *testing.T) crawl.Target
}

// inMemoryAndHTTP reaches a lister over go-sdk in-memory transports and over
// streamable HTTP (stateful) on loopback.
func inMemoryAndHTTP(l discoverytest.Lister) []transport {
	return []transport{
		{"in-memory", func(t *testing.T) crawl.Target { tg, _ := inMemory(t, l, discoverytest.ServerOptions{}); return tg }},
		{"http", func(t *testing.T) crawl.Target {
			return crawl.Target{URL: discoverytest.NewHTTP(t, l, discoverytest.ServerOptions{}, false).URL}
		}},
	}
}

func want(t *testing.T, r *crawl.Result, state catalogv1.DiscoveryState, reason discoveryv1.RunReason) {
	t.Helper()
	if r.State != state || r.Reason != reason {
		t.Fatalf("got %v %v (%s), want %v %v", r.State, r.Reason, r.Detail, state, reason)
	}
}

func TestVersionedCatalogIsProvenAcrossPages(t *testing.T) {
	cat := discoverytest.NewCatalog("r-1", 10, discoverytest.Tools("inv", 25)...)
	target, srv := inMemory(t, cat, discoverytest.ServerOptions{})
	r := crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true})
	want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	if len(r.Pages) != 3 || len(r.Tools) != 25 {
		t.Fatalf("pages %d tools %d, want 3 and 25", len(r.Pages), len(r.Tools))
	}
	if r.Revision != "r-1" || r.ClosingRevision != "r-1" {
		t.Fatalf("revisions %q %q", r.Revision, r.ClosingRevision)
	}
	if srv.Calls() != 4 {
		t.Fatalf("server saw %d tools/list calls, want 3 pages + 1 closing re-check", srv.Calls())
	}
	p := r.Pages
	if p[0].CursorIn != "" || !p[0].HasNext || p[0].CursorOut != "10@r-1" || p[1].CursorIn != "10@r-1" || p[2].HasNext || p[2].ToolCount != 5 {
		t.Fatalf("page detail wrong: %+v", p)
	}
	var digests []string
	for _, pg := range p {
		if !canonical.ValidDigest(pg.Digest) || pg.Bytes <= 0 {
			t.Fatalf("page %d digest %q bytes %d", pg.Index, pg.Digest, pg.Bytes)
		}
		digests = append(digests, pg.Digest)
	}
	root, _ := canonical.DigestValue(digests)
	if r.PageRoot != root {
		t.Fatalf("page root %s, want %s", r.PageRoot, root)
	}
	if r.ProtocolVersion != "2026-07-28" {
		t.Fatalf("negotiated %q, want the go-sdk's newest 2026-07-28", r.ProtocolVersion)
	}
}

func TestSourceWithoutRevisionIsUnversionedObservation(t *testing.T) {
	cat := discoverytest.NewCatalog("", 2, discoverytest.Tools("x", 3)...)
	target, _ := inMemory(t, cat, discoverytest.ServerOptions{})
	r := crawl.Crawl(ctx(t), target, crawl.Options{})
	want(t, r, unversioned, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	if len(r.Tools) != 3 || r.Revision != "" {
		t.Fatalf("tools %d revision %q", len(r.Tools), r.Revision)
	}
}

func TestVersionedServerWithoutRevisionIsIncomplete(t *testing.T) {
	cat := discoverytest.NewCatalog("", 2, discoverytest.Tools("x", 3)...)
	target, _ := inMemory(t, cat, discoverytest.ServerOptions{})
	r := crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true})
	want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_REVISION_MISSING)
}

// rawResult is a hand-written page: unknown fields, whitespace and member
// order exactly as a server might send them.
const rawTool = `{ "zeta": {"b":1, "a":[1,2]}, "name":"weird", "inputSchema": {"type":"object"},
   "x-vendor":"kept", "_meta": {"k": "v"} }`

func TestToolObjectsAreKeptVerbatimWithUnknownFields(t *testing.T) {
	l := discoverytest.ListerFunc(func(call int, cursor *string) discoverytest.Reply {
		return discoverytest.Reply{Result: json.RawMessage(`{"tools":[` + rawTool + `],"_meta":{"dev.toolcrib/catalog-revision":"r"}}`)}
	})
	for _, tc := range inMemoryAndHTTP(l) {
		t.Run(tc.name, func(t *testing.T) {
			r := crawl.Crawl(ctx(t), tc.target(t), crawl.Options{Versioned: true})
			want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
			// Over HTTP the bytes arrive as the server wrote them; the go-sdk's
			// in-memory server compacts its own output (member order and
			// unknown fields survive either way).
			wantRaw := rawTool
			if tc.name == "in-memory" {
				var b bytes.Buffer
				_ = json.Compact(&b, []byte(rawTool))
				wantRaw = b.String()
			}
			if string(r.Tools[0].Raw) != wantRaw {
				t.Fatalf("raw changed:\n got %s\nwant %s", r.Tools[0].Raw, wantRaw)
			}
			d, err := canonical.Digest([]byte(rawTool))
			if err != nil || r.Tools[0].Digest != d {
				t.Fatalf("digest %s, want %s (%v)", r.Tools[0].Digest, d, err)
			}
			if !strings.Contains(string(r.Tools[0].Canonical), `"x-vendor":"kept"`) {
				t.Fatalf("canonical form lost an unknown field: %s", r.Tools[0].Canonical)
			}
		})
	}
}

func TestListChangedDuringScanAbortsIt(t *testing.T) {
	cat := discoverytest.NewCatalog("r-1", 1, discoverytest.Tools("x", 4)...)
	cat.OnList = func(c *discoverytest.Catalog, call int, cursor *string, r *discoverytest.Reply) {
		r.NotifyBefore = call == 2 // before the third page, i.e. after page 2
	}
	for _, tc := range append(inMemoryAndHTTP(cat), transport{"http-stateless-2026-07-28", func(t *testing.T) crawl.Target {
		return crawl.Target{URL: discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{Stateless: true}, false).URL}
	}}) {
		t.Run(tc.name, func(t *testing.T) {
			r := crawl.Crawl(ctx(t), tc.target(t), crawl.Options{Versioned: true})
			want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_LIST_CHANGED)
			if len(r.Pages) != 2 {
				t.Fatalf("%d pages recorded, want the 2 read before the notification", len(r.Pages))
			}
		})
	}
}

func TestRevisionChangingBetweenPagesIsRefused(t *testing.T) {
	t.Run("revision-bound cursor refused", func(t *testing.T) {
		cat := discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("x", 5)...)
		cat.OnList = func(c *discoverytest.Catalog, call int, cursor *string, r *discoverytest.Reply) {
			if call == 1 {
				c.Set("r-2", discoverytest.Tools("y", 5)...)
			}
		}
		target, _ := inMemory(t, cat, discoverytest.ServerOptions{})
		r := crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true})
		want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH)
		if !strings.Contains(r.Detail, "-32602") {
			t.Fatalf("detail %q does not name the refused cursor", r.Detail)
		}
	})
	t.Run("page carries another revision", func(t *testing.T) {
		l := discoverytest.ListerFunc(func(call int, cursor *string) discoverytest.Reply {
			rev, next := "r-1", `,"nextCursor":"c1"`
			if cursor != nil {
				rev, next = "r-2", ""
			}
			return discoverytest.Reply{Result: json.RawMessage(fmt.Sprintf(`{"tools":[%s]%s,"_meta":{%q:%q}}`, discoverytest.Tool("a"), next, discoverytest.RevisionKey, rev))}
		})
		target, _ := inMemory(t, l, discoverytest.ServerOptions{})
		r := crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true})
		want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH)
	})
}

func TestClosingRecheckReachesTheServerAndCatchesLateChanges(t *testing.T) {
	t.Run("revision moved after the last page", func(t *testing.T) {
		cat := discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("x", 4)...)
		cat.OnList = func(c *discoverytest.Catalog, call int, cursor *string, r *discoverytest.Reply) {
			if call == 2 { // the closing re-check
				c.Set("r-2", discoverytest.Tools("x", 4)...)
			}
		}
		target, _ := inMemory(t, cat, discoverytest.ServerOptions{})
		r := crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true})
		want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH)
		if r.ClosingRevision != "r-2" {
			t.Fatalf("closing revision %q", r.ClosingRevision)
		}
	})
	t.Run("first page changed under the same revision", func(t *testing.T) {
		cat := discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("x", 4)...)
		cat.OnList = func(c *discoverytest.Catalog, call int, cursor *string, r *discoverytest.Reply) {
			if call == 2 {
				c.Set("", discoverytest.Tools("z", 4)...)
			}
		}
		target, _ := inMemory(t, cat, discoverytest.ServerOptions{})
		want(t, crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true}), incomplete, discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH)
	})
	t.Run("ttlMs does not let the SDK cache answer", func(t *testing.T) {
		cat := discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("x", 4)...)
		cat.TTLMs = 600_000
		for _, v := range []string{"2026-07-28", "2025-11-25"} {
			target, srv := inMemory(t, cat, discoverytest.ServerOptions{Versions: []string{v}})
			r := crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true})
			want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
			if srv.Calls() != 3 {
				t.Fatalf("%s: server saw %d tools/list calls, want 2 pages + the closing re-check", v, srv.Calls())
			}
		}
	})
}

func TestCursorFaults(t *testing.T) {
	page := func(next string) discoverytest.Reply {
		return discoverytest.Reply{Result: json.RawMessage(fmt.Sprintf(`{"tools":[%s],"nextCursor":%q,"_meta":{%q:"r"}}`, discoverytest.Tool("a"), next, discoverytest.RevisionKey))}
	}
	for _, tc := range []struct {
		name   string
		next   func(call int) string
		reason discoveryv1.RunReason
	}{
		{"repeated", func(call int) string { return "same" }, discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR},
		{"cycle", func(call int) string { return []string{"a", "b", "c", "a"}[call] }, discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE},
		{"empty repeated", func(call int) string { return "" }, discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR},
		// Since 2026-07-28 the first request's absent cursor is "" to the
		// server: an empty nextCursor on page 1 points back at page 1.
		{"empty on the first page", func(call int) string { return []string{"", "b"}[min(call, 1)] }, discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR},
		{"empty later, after the first page", func(call int) string { return []string{"a", "b", ""}[min(call, 2)] }, discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := discoverytest.ListerFunc(func(call int, cursor *string) discoverytest.Reply { return page(tc.next(call)) })
			target, _ := inMemory(t, l, discoverytest.ServerOptions{})
			want(t, crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true}), incomplete, tc.reason)
		})
	}
}

func TestCaps(t *testing.T) {
	cat := discoverytest.NewCatalog("r", 2, discoverytest.Tools("x", 10)...)
	for _, tc := range []struct {
		name   string
		o      crawl.Options
		reason discoveryv1.RunReason
	}{
		{"pages", crawl.Options{MaxPages: 4}, discoveryv1.RunReason_RUN_REASON_PAGE_CAP},
		{"tools", crawl.Options{MaxTools: 9}, discoveryv1.RunReason_RUN_REASON_TOOL_CAP},
		{"bytes", crawl.Options{MaxBytes: 600}, discoveryv1.RunReason_RUN_REASON_BYTE_CAP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, _ := inMemory(t, cat, discoverytest.ServerOptions{})
			tc.o.Versioned = true
			want(t, crawl.Crawl(ctx(t), target, tc.o), incomplete, tc.reason)
		})
	}
	t.Run("one HTTP message over the cap", func(t *testing.T) {
		big := discoverytest.NewCatalog("r", 0, discoverytest.Tools("x", 200)...)
		srv := discoverytest.NewHTTP(t, big, discoverytest.ServerOptions{}, false)
		r := crawl.Crawl(ctx(t), crawl.Target{URL: srv.URL}, crawl.Options{Versioned: true, MaxBytes: 1000})
		want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_BYTE_CAP)
	})
}

// TestEmptyStringCursorIsNotTheEndSince20260728 protects DESIGN §6: from
// protocol 2026-07-28 on an empty-string nextCursor is not the end of the
// list, so a server that ends its list that way never gets a partial
// catalog proven. Nor is it followed: the first request's absent cursor is
// "" to a server too (the revision package and go-sdk start over at ""),
// so "" leads back to page 1 — a cursor cycle (a repeated cursor on page
// 1), even for a server that claims to tell "" from no cursor.
func TestEmptyStringCursorIsNotTheEndSince20260728(t *testing.T) {
	cat := discoverytest.NewCatalog("r", 2, discoverytest.Tools("x", 6)...)
	cat.EmptyCursorPage = 2
	for _, tc := range []transport{
		{"in-memory", func(t *testing.T) crawl.Target {
			tg, _ := inMemory(t, cat, discoverytest.ServerOptions{Versions: []string{"2026-07-28"}})
			return tg
		}},
		{"http-stateless", func(t *testing.T) crawl.Target {
			return crawl.Target{URL: discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{Stateless: true}, false).URL}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := crawl.Crawl(ctx(t), tc.target(t), crawl.Options{Versioned: true})
			want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE)
			if r.ProtocolVersion != "2026-07-28" || len(r.Pages) != 2 || !r.Pages[1].HasNext || r.Pages[1].CursorOut != "" {
				t.Fatalf("version %s pages %+v", r.ProtocolVersion, r.Pages)
			}
		})
	}
}

// TestEmptyStringCursorEndsTheListBefore20260728 protects the other half
// of DESIGN §6: before 2026-07-28 an empty-string nextCursor ends the list
// (go-sdk servers of those versions cannot even send one), so the crawl
// does not ask for a page the server never offered.
func TestEmptyStringCursorEndsTheListBefore20260728(t *testing.T) {
	cat := discoverytest.NewCatalog("r", 2, discoverytest.Tools("x", 6)...)
	cat.EmptyCursorPage = 2
	for _, v := range []string{"2025-06-18", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			target, srv := inMemory(t, cat, discoverytest.ServerOptions{Versions: []string{v}})
			r := crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true})
			want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
			if len(r.Pages) != 2 || r.Pages[1].HasNext || len(r.Tools) != 4 || srv.Calls() != 3 {
				t.Fatalf("pages %+v, %d tools, %d calls: want 2 pages, 4 tools, 2 pages + the re-check", r.Pages, len(r.Tools), srv.Calls())
			}
		})
	}
}

func TestProtocolVersions(t *testing.T) {
	cat := discoverytest.NewCatalog("r", 0, discoverytest.Tools("x", 2)...)
	for _, v := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			target, _ := inMemory(t, cat, discoverytest.ServerOptions{Versions: []string{v}})
			r := crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true})
			want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
			if r.ProtocolVersion != v {
				t.Fatalf("in-memory negotiated %q", r.ProtocolVersion)
			}
			srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{Versions: []string{v}, Stateless: v == "2026-07-28"}, false)
			r = crawl.Crawl(ctx(t), crawl.Target{URL: srv.URL}, crawl.Options{Versioned: true})
			want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
			if r.ProtocolVersion != v {
				t.Fatalf("http negotiated %q", r.ProtocolVersion)
			}
		})
	}
	t.Run("older than the minimum", func(t *testing.T) {
		target, _ := inMemory(t, cat, discoverytest.ServerOptions{Versions: []string{"2025-03-26"}})
		want(t, crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true}), incomplete, discoveryv1.RunReason_RUN_REASON_PROTOCOL_UNSUPPORTED)
	})
	if got := mcp.SupportedProtocolVersions(); len(got) == 0 || got[0] != "2026-07-28" {
		t.Fatalf("go-sdk supports %v", got)
	}
}

const secret = "s3cr3t-upstream-token"

func TestHTTPCredentialIsSentAndNeverEchoed(t *testing.T) {
	cat := discoverytest.NewCatalog("r", 0, discoverytest.Tools("x", 2)...)
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{Token: secret}, false)
	r := crawl.Crawl(ctx(t), crawl.Target{URL: srv.URL, Credential: secret}, crawl.Options{Versioned: true})
	want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	if srv.Authorized.Load() == 0 {
		t.Fatal("the server never saw the credential")
	}
	r = crawl.Crawl(ctx(t), crawl.Target{URL: srv.URL, Credential: "wrong-" + secret}, crawl.Options{Versioned: true})
	want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR)
	if strings.Contains(r.Detail, secret) {
		t.Fatalf("detail leaks the credential: %s", r.Detail)
	}
}

func TestTLSIdentityIsPinnedToTheLeafKey(t *testing.T) {
	cat := discoverytest.NewCatalog("r", 0, discoverytest.Tools("x", 2)...)
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{Token: secret}, true)
	roots := x509.NewCertPool()
	roots.AddCert(srv.HTTP.Certificate())
	o := crawl.Options{Versioned: true, RootCAs: roots}
	spki := crawl.SPKIDigest(srv.HTTP.Certificate().RawSubjectPublicKeyInfo)

	r := crawl.Crawl(ctx(t), crawl.Target{URL: srv.URL, Credential: secret}, o)
	want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	if r.IdentityDigest != spki || r.EndpointDigest != crawl.URLDigest(srv.URL) {
		t.Fatalf("identity %s endpoint %s, want %s", r.IdentityDigest, r.EndpointDigest, spki)
	}
	want(t, crawl.Crawl(ctx(t), crawl.Target{URL: srv.URL, Credential: secret, Pin: spki}, o), proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)

	before := srv.Requests.Load()
	r = crawl.Crawl(ctx(t), crawl.Target{URL: srv.URL, Credential: secret, Pin: "sha256:" + strings.Repeat("0", 64)}, o)
	want(t, r, quarantined, discoveryv1.RunReason_RUN_REASON_IDENTITY_MISMATCH)
	if srv.Requests.Load() != before {
		t.Fatal("a request (with the credential) reached a server whose key does not match the pin")
	}
	// An untrusted chain is a transport error, not an identity decision.
	r = crawl.Crawl(ctx(t), crawl.Target{URL: srv.URL}, crawl.Options{Versioned: true})
	want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR)
}

func TestPlainHTTPOnlyOnLoopback(t *testing.T) {
	r := crawl.Crawl(ctx(t), crawl.Target{URL: "http://mcp.example.invalid/mcp"}, crawl.Options{})
	want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR)
	url := "http://127.0.0.1:1/mcp"
	r = crawl.Crawl(ctx(t), crawl.Target{URL: url, Pin: crawl.URLDigest("http://127.0.0.1:2/mcp")}, crawl.Options{})
	want(t, r, quarantined, discoveryv1.RunReason_RUN_REASON_IDENTITY_MISMATCH)
}

func TestStdioServer(t *testing.T) {
	envFile := t.TempDir() + "/env"
	cmd, args := discoverytest.StdioServer(t, discoverytest.StdioSpec{
		Tools: discoverytest.Tools("s", 5), PageSize: 2, Revision: "r-9",
		TokenEnv: crawl.DefaultCredentialEnv, Token: secret, EnvFile: envFile,
	})
	t.Setenv("TOOLCRIB_POSTGRES_URL", "postgres://must-not-leak")
	r := crawl.Crawl(ctx(t), crawl.Target{Command: cmd, Args: args, Credential: secret}, crawl.Options{Versioned: true})
	want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	if id, err := stdio.NewHasher().Identity(cmd, args, ""); err != nil || len(r.Tools) != 5 || r.IdentityDigest != id ||
		r.EndpointDigest != crawl.CommandDigest(cmd, args) {
		t.Fatalf("tools %d identity %s", len(r.Tools), r.IdentityDigest)
	}
	env, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(env), crawl.DefaultCredentialEnv+"="+secret) || strings.Contains(string(env), "TOOLCRIB_POSTGRES_URL") {
		t.Fatalf("stdio server environment:\n%s", env)
	}
	os.Remove(envFile)
	r = crawl.Crawl(ctx(t), crawl.Target{Command: cmd, Args: args, Credential: secret, Pin: crawl.CommandDigest(cmd, nil)}, crawl.Options{Versioned: true})
	want(t, r, quarantined, discoveryv1.RunReason_RUN_REASON_IDENTITY_MISMATCH)
	if _, err := os.Stat(envFile); err == nil {
		t.Fatal("the process was started although its command line does not match the pin")
	}
	r = crawl.Crawl(ctx(t), crawl.Target{Command: cmd, Args: args}, crawl.Options{Versioned: true})
	want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR)
}

func TestCacheScopePrivateIsRecorded(t *testing.T) {
	cat := discoverytest.NewCatalog("r", 1, discoverytest.Tools("x", 2)...)
	cat.OnList = func(c *discoverytest.Catalog, call int, cursor *string, r *discoverytest.Reply) {
		c.CacheScope = map[bool]string{true: "private", false: ""}[call == 1]
	}
	target, _ := inMemory(t, cat, discoverytest.ServerOptions{})
	r := crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true})
	want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	if r.CacheScope != "private" || r.Pages[1].CacheScope != "private" {
		t.Fatalf("cache scope %q pages %+v", r.CacheScope, r.Pages)
	}
}

func TestMalformedResultsAndTools(t *testing.T) {
	t.Run("result without tools", func(t *testing.T) {
		l := discoverytest.ListerFunc(func(int, *string) discoverytest.Reply {
			return discoverytest.Reply{Result: json.RawMessage(`{"items":[]}`)}
		})
		target, _ := inMemory(t, l, discoverytest.ServerOptions{})
		want(t, crawl.Crawl(ctx(t), target, crawl.Options{}), incomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR)
	})
	t.Run("JSON-RPC error", func(t *testing.T) {
		l := discoverytest.ListerFunc(func(int, *string) discoverytest.Reply {
			return discoverytest.Reply{Error: &jsonrpc.Error{Code: -32000, Message: "boom"}}
		})
		target, _ := inMemory(t, l, discoverytest.ServerOptions{})
		want(t, crawl.Crawl(ctx(t), target, crawl.Options{}), incomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR)
	})
	t.Run("tools the SDK cannot decode are still captured", func(t *testing.T) {
		l := discoverytest.ListerFunc(func(int, *string) discoverytest.Reply {
			return discoverytest.Reply{Result: json.RawMessage(`{"tools":[{"name":7},"str",{"name":"a","a":1,"a":2}]}`)}
		})
		target, _ := inMemory(t, l, discoverytest.ServerOptions{})
		r := crawl.Crawl(ctx(t), target, crawl.Options{})
		want(t, r, unversioned, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
		if len(r.Tools) != 3 || r.Tools[0].Malformed != "" || r.Tools[1].Malformed == "" || r.Tools[2].Malformed == "" {
			t.Fatalf("tools: %+v", r.Tools)
		}
	})
}

func TestListChangedAfterTheCrawlIsDelivered(t *testing.T) {
	cat := discoverytest.NewCatalog("r", 0, discoverytest.Tools("x", 2)...)
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (crawl.Target, *discoverytest.Server)
	}{
		{"in-memory", func(t *testing.T) (crawl.Target, *discoverytest.Server) {
			return inMemory(t, cat, discoverytest.ServerOptions{})
		}},
		{"http-2025-11-25", func(t *testing.T) (crawl.Target, *discoverytest.Server) {
			s := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
			return crawl.Target{URL: s.URL}, s.Server
		}},
		{"http-stateless-2026-07-28", func(t *testing.T) (crawl.Target, *discoverytest.Server) {
			s := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{Stateless: true}, false)
			return crawl.Target{URL: s.URL}, s.Server
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, srv := tc.open(t)
			s, f := crawl.Open(ctx(t), target, crawl.Options{Versioned: true})
			if f != nil {
				t.Fatal(f)
			}
			defer s.Close()
			want(t, s.Crawl(ctx(t)), proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
			before := s.ListChangedCount()
			deadline := time.After(10 * time.Second)
			for s.ListChangedCount() == before {
				srv.Notify() // the standalone stream may still be opening: repeat
				select {
				case <-s.ListChanged():
				case <-time.After(100 * time.Millisecond):
				case <-deadline:
					t.Fatal("no list_changed arrived after the crawl")
				}
			}
		})
	}
}

// TestPlainGoSDKServer crawls an unmodified go-sdk server (its own
// name-based pagination, SSE responses over HTTP, no revision): an
// unversioned observation of every tool.
func TestPlainGoSDKServer(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "v1"}, &mcp.ServerOptions{PageSize: 2})
	for _, name := range []string{"e", "d", "c", "b", "a"} {
		s.AddTool(&mcp.Tool{Name: name, Description: "tool " + name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	check := func(t *testing.T, r *crawl.Result) {
		want(t, r, unversioned, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
		if len(r.Tools) != 5 || len(r.Pages) != 3 {
			t.Fatalf("tools %d pages %d", len(r.Tools), len(r.Pages))
		}
		if !strings.Contains(string(r.Tools[0].Raw), `"name":"a"`) {
			t.Fatalf("first tool %s", r.Tools[0].Raw)
		}
	}
	t.Run("http", func(t *testing.T) {
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		srv := httptest.NewServer(h)
		defer srv.Close()
		check(t, crawl.Crawl(ctx(t), crawl.Target{URL: srv.URL}, crawl.Options{}))
	})
	t.Run("in-memory", func(t *testing.T) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := s.Connect(ctx(t), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ss.Close()
		check(t, crawl.Crawl(ctx(t), crawl.Target{Transport: ct, Identity: "sha256:x"}, crawl.Options{}))
	})
}

// The tests below are regressions found by the randomized fault suite
// (e2e/faults), which compares this crawler with an independent oracle.

// TestRecheckMayCutPagesDifferently: a whole catalog under one revision is
// proven even when the closing re-check's first page is cut at another
// size than the walk's (page sizes are the server's choice); only its
// content must agree with what the walk read.
func TestRecheckMayCutPagesDifferently(t *testing.T) {
	cat := discoverytest.NewCatalog("r-1", 3, discoverytest.Tools("x", 6)...)
	cat.OnList = func(c *discoverytest.Catalog, call int, cursor *string, r *discoverytest.Reply) {
		c.PageSize = 3
		if call == 2 { // the closing re-check
			c.PageSize = 2
		}
	}
	for _, src := range []struct {
		name      string
		versioned bool
		state     catalogv1.DiscoveryState
	}{{"versioned", true, proven}, {"unversioned", false, unversioned}} {
		t.Run(src.name, func(t *testing.T) {
			target, _ := inMemory(t, cat, discoverytest.ServerOptions{})
			r := crawl.Crawl(ctx(t), target, crawl.Options{Versioned: src.versioned})
			want(t, r, src.state, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
			if len(r.Tools) != 6 || len(r.Pages) != 2 {
				t.Fatalf("%d tools over %d pages", len(r.Tools), len(r.Pages))
			}
		})
	}
}

// TestRecheckContradictingTheWalkIsRefused: the re-check's tools must be
// the walk's first tools, and all of them when it has no next page.
func TestRecheckContradictingTheWalkIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rev       string
		pageSize  int
		atRecheck func(c *discoverytest.Catalog)
	}{
		{"unversioned catalog changed in front of the walk", "", 2, func(c *discoverytest.Catalog) {
			c.Set("", append([]json.RawMessage{discoverytest.Tool("new")}, discoverytest.Tools("x", 4)...)...)
		}},
		{"unversioned catalog grew behind a one-page walk", "", 0, func(c *discoverytest.Catalog) {
			c.Set("", discoverytest.Tools("x", 5)...)
		}},
		{"a one-page walk whose server ended the list early", "r-1", 2, func(c *discoverytest.Catalog) {
			// The walk's page 1 had no nextCursor (see below); the re-check
			// shows the next page the walk was denied.
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat := discoverytest.NewCatalog(tc.rev, tc.pageSize, discoverytest.Tools("x", 4)...)
			calls := 0
			cat.OnList = func(c *discoverytest.Catalog, call int, cursor *string, r *discoverytest.Reply) {
				calls++
				if cursor == nil && calls > 1 {
					tc.atRecheck(c)
				}
				if calls == 1 && tc.rev != "" { // the lie: page 1 of 2 says it is the last
					r.Result = json.RawMessage(fmt.Sprintf(`{"tools":[%s,%s],"_meta":{%q:%q}}`,
						discoverytest.Tool("x_0"), discoverytest.Tool("x_1"), discoverytest.RevisionKey, tc.rev))
				}
			}
			target, _ := inMemory(t, cat, discoverytest.ServerOptions{})
			r := crawl.Crawl(ctx(t), target, crawl.Options{Versioned: tc.rev != ""})
			want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH)
		})
	}
}

// TestByteCapBoundsTheWalkNotTheRecheck: the caps bound the catalog read by
// the walk; a catalog of exactly MaxBytes is proven although the re-check
// reads more.
func TestByteCapBoundsTheWalkNotTheRecheck(t *testing.T) {
	cat := discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("x", 4)...)
	target, _ := inMemory(t, cat, discoverytest.ServerOptions{})
	r := crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true})
	want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	var walk int64
	for _, p := range r.Pages {
		walk += p.Bytes
	}
	if r.Bytes <= walk {
		t.Fatalf("result bytes %d do not include the re-check (walk %d)", r.Bytes, walk)
	}
	target, _ = inMemory(t, cat, discoverytest.ServerOptions{})
	want(t, crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true, MaxBytes: walk}), proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	target, _ = inMemory(t, cat, discoverytest.ServerOptions{})
	want(t, crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true, MaxBytes: walk - 1}), incomplete, discoveryv1.RunReason_RUN_REASON_BYTE_CAP)
}

// TestIntegrityFaultsComeBeforeCaps: on one page, a revision fault, then a
// cursor fault, then the caps decide the reason (crawl/doc.go rules 6–8).
func TestIntegrityFaultsComeBeforeCaps(t *testing.T) {
	page := func(rev, next string, tools int) discoverytest.Reply {
		ts := make([]string, tools)
		for i := range ts {
			ts[i] = string(discoverytest.Tool(fmt.Sprintf("t%d", i)))
		}
		nc := ""
		if next != "" {
			nc = fmt.Sprintf(`,"nextCursor":%q`, next)
		}
		return discoverytest.Reply{Result: json.RawMessage(fmt.Sprintf(`{"tools":[%s]%s,"_meta":{%q:%q}}`, strings.Join(ts, ","), nc, discoverytest.RevisionKey, rev))}
	}
	for _, tc := range []struct {
		name   string
		second discoverytest.Reply
		reason discoveryv1.RunReason
	}{
		{"another revision and over the tool cap", page("r-2", "", 5), discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH},
		{"a repeated cursor and over the tool cap", page("r-1", "c1", 5), discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR},
		{"a cursor cycle and over the tool cap", page("r-1", "c0", 5), discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := discoverytest.ListerFunc(func(call int, cursor *string) discoverytest.Reply {
				switch {
				case cursor == nil:
					return page("r-1", "c0", 1)
				case *cursor == "c0":
					return page("r-1", "c1", 1)
				}
				return tc.second
			})
			target, _ := inMemory(t, l, discoverytest.ServerOptions{})
			want(t, crawl.Crawl(ctx(t), target, crawl.Options{Versioned: true, MaxTools: 4}), incomplete, tc.reason)
		})
	}
}

// TestRefusedCursorOfAnUnversionedSourceIsATransportError: -32602 means
// "your revision expired" only for a source that has revisions (DESIGN §6).
func TestRefusedCursorOfAnUnversionedSourceIsATransportError(t *testing.T) {
	cat := discoverytest.NewCatalog("", 2, discoverytest.Tools("x", 5)...)
	cat.OnList = func(c *discoverytest.Catalog, call int, cursor *string, r *discoverytest.Reply) {
		if cursor != nil {
			r.Error = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor"}
		}
	}
	target, _ := inMemory(t, cat, discoverytest.ServerOptions{})
	want(t, crawl.Crawl(ctx(t), target, crawl.Options{}), incomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR)
}

// TestMessageTooDeepIsQuarantined: a tool whose input schema nests 2,000
// levels makes the tools/list result deeper than the go-sdk decodes (1,000
// levels). The crawl measures the nesting on the wire and ends QUARANTINED
// MESSAGE_TOO_DEEP with the limit in the detail — refused content, not a
// TRANSPORT_ERROR to retry — over streamable HTTP and stdio. A schema that
// is deep but within the limit is not refused by the crawl (the validator
// judges it).
func TestMessageTooDeepIsQuarantined(t *testing.T) {
	for _, levels := range []int{2000, 100} {
		tools := append(discoverytest.Tools("inv", 3), discoverytest.DeepTool("deep", levels))
		cat := discoverytest.NewCatalog("r-1", 2, tools...)
		cmd, args := discoverytest.StdioServer(t, discoverytest.StdioSpec{Tools: tools, PageSize: 2, Revision: "r-1"})
		for _, tr := range []struct {
			name   string
			target crawl.Target
		}{
			{"http", crawl.Target{URL: discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false).URL}},
			{"http 2026-07-28", crawl.Target{URL: discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{Stateless: true}, false).URL}},
			{"stdio", crawl.Target{Command: cmd, Args: args}},
		} {
			t.Run(fmt.Sprintf("%s %d levels", tr.name, levels), func(t *testing.T) {
				r := crawl.Crawl(ctx(t), tr.target, crawl.Options{Versioned: true})
				if levels < crawl.MaxMessageDepth {
					want(t, r, proven, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
					return
				}
				want(t, r, quarantined, discoveryv1.RunReason_RUN_REASON_MESSAGE_TOO_DEEP)
				if !strings.Contains(r.Detail, "deeper than 1000 levels") {
					t.Fatalf("the detail does not name the limit: %q", r.Detail)
				}
				if len(r.Pages) != 1 {
					t.Fatalf("%d pages recorded before the fault, want 1 (page 2 holds the deep tool)", len(r.Pages))
				}
			})
		}
	}
}

// TestListeningSessionPingsAndHears: a session kept open after a crawl (a
// listener) reports the server's tools.listChanged declaration, answers
// pings (2026-07-28 has none: nil), hears a later list_changed, and, under
// 2026-07-28, reports the end of its subscriptions/listen stream when the
// server drops the connection; over streamable HTTP for 2025-11-25
// (standalone SSE stream) and 2026-07-28 (subscriptions/listen).
func TestListeningSessionPingsAndHears(t *testing.T) {
	for _, tc := range []struct {
		version   string
		stateless bool
	}{{"2025-11-25", false}, {"2026-07-28", true}} {
		t.Run(tc.version, func(t *testing.T) {
			cat := discoverytest.NewCatalog("r-1", 10, discoverytest.Tools("inv", 3)...)
			srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{Stateless: tc.stateless}, false)
			s, f := crawl.Open(ctx(t), crawl.Target{URL: srv.URL}, crawl.Options{})
			if f != nil {
				t.Fatal(f)
			}
			defer s.Close()
			if s.ProtocolVersion() != tc.version || !s.ListChangedDeclared() {
				t.Fatalf("version %s, listChanged declared %v", s.ProtocolVersion(), s.ListChangedDeclared())
			}
			if err := s.Ping(ctx(t)); err != nil {
				t.Fatalf("ping: %v", err)
			}
			for s.ListChangedCount() == 0 {
				srv.Notify() // repeated: the standalone stream may still be opening
				select {
				case <-s.ListChanged():
				case <-time.After(200 * time.Millisecond):
				case <-ctx(t).Done():
					t.Fatal("no list_changed heard")
				}
			}
			if !tc.stateless {
				return
			}
			select {
			case <-s.ListenEnded():
				t.Fatal("the listen stream ended while the server was up")
			default:
			}
			srv.HTTP.CloseClientConnections()
			select {
			case <-s.ListenEnded():
			case <-time.After(5 * time.Second):
				t.Fatal("the end of the listen stream went unnoticed")
			}
		})
	}
}

// TestToolsForCapableClientsAreListed: a server that lists some tools only
// to clients declaring elicitation or sampling (as server-everything does)
// lists them to discovery, so the gateway can offer them to a client that
// declared the same; an elicitation or sampling request the server sends
// during the listing is refused and the scan completes.
func TestToolsForCapableClientsAreListed(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "capable", Version: "v1"}, nil)
	for _, name := range []string{"plain", "ask_user", "summarize"} {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	var asked, sampled atomic.Value
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			lr, ok := res.(*mcp.ListToolsResult)
			if method != "tools/list" || !ok || err != nil {
				return res, err
			}
			ss := req.GetSession().(*mcp.ServerSession)
			caps := ss.InitializeParams().Capabilities
			var kept []*mcp.Tool
			for _, tool := range lr.Tools {
				if tool.Name == "ask_user" && (caps == nil || caps.Elicitation == nil) ||
					tool.Name == "summarize" && (caps == nil || caps.Sampling == nil) {
					continue
				}
				kept = append(kept, tool)
			}
			_, eerr := ss.Elicit(ctx, &mcp.ElicitParams{Message: "who are you?", RequestedSchema: &jsonschema.Schema{Type: "object"}})
			asked.Store(fmt.Sprint(eerr))
			_, serr := ss.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 1, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			sampled.Store(fmt.Sprint(serr))
			return &mcp.ListToolsResult{Tools: kept, NextCursor: lr.NextCursor}, nil
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	r := crawl.Crawl(ctx(t), crawl.Target{URL: srv.URL}, crawl.Options{ProtocolVersion: "2025-11-25"})
	want(t, r, unversioned, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	var names []string
	for _, tool := range r.Tools {
		var d struct{ Name string }
		if err := json.Unmarshal(tool.Raw, &d); err != nil {
			t.Fatal(err)
		}
		names = append(names, d.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"ask_user", "plain", "summarize"}) {
		t.Fatalf("listed %v", names)
	}
	for what, v := range map[string]*atomic.Value{"elicitation": &asked, "sampling": &sampled} {
		if got, _ := v.Load().(string); !strings.Contains(got, "answers no elicitation or sampling request") {
			t.Fatalf("the server's %s request during the scan: %q", what, got)
		}
	}
}
