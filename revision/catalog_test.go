package revision_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/revision"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// transport connects a client session to server in one of the ways toolcrib
// reaches MCP servers.
type transport struct {
	name    string
	version string // protocol version the client asks for
	want    string // protocol version the session must end up with
	connect func(t *testing.T, server *mcp.Server, version string) *mcp.ClientSession
}

var transports = []transport{
	{"in-memory/2025-06-18", "2025-06-18", "2025-06-18", connectInMemory},
	{"in-memory/2025-11-25", "2025-11-25", "2025-11-25", connectInMemory},
	{"in-memory/2026-07-28", "2026-07-28", "2026-07-28", connectInMemory},
	{"http/2025-06-18", "2025-06-18", "2025-06-18", connectHTTP(false)},
	{"http/2025-11-25", "2025-11-25", "2025-11-25", connectHTTP(false)},
	// A stateful streamable HTTP handler cannot serve 2026-07-28: the SDK
	// falls back to the initialize handshake at 2025-11-25.
	{"http-stateful/2026-07-28", "2026-07-28", "2025-11-25", connectHTTP(false)},
	{"http-stateless/2026-07-28", "2026-07-28", "2026-07-28", connectHTTP(true)},
}

func connectInMemory(t *testing.T, server *mcp.Server, version string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	return connectClient(t, ct, version)
}

func connectHTTP(stateless bool) func(t *testing.T, server *mcp.Server, version string) *mcp.ClientSession {
	return func(t *testing.T, server *mcp.Server, version string) *mcp.ClientSession {
		t.Helper()
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
			&mcp.StreamableHTTPOptions{Stateless: stateless})
		hs := httptest.NewServer(h)
		t.Cleanup(hs.Close)
		return connectClient(t, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, version)
	}
}

func connectClient(t *testing.T, tr mcp.Transport, version string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func newServer(t *testing.T, pageSize int, names ...string) (*mcp.Server, *revision.Catalog) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "test-server", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	catalog, err := revision.New(server, revision.Options{Key: testKey, PageSize: pageSize})
	if err != nil {
		t.Fatalf("revision.New: %v", err)
	}
	for _, name := range names {
		addTool(catalog, name, "does "+name)
	}
	return server, catalog
}

func addTool(c *revision.Catalog, name, description string) {
	c.AddTool(&mcp.Tool{
		Name:        name,
		Description: description,
		InputSchema: map[string]any{"type": "object"},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
}

func toolNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("tool_%05d", i)
	}
	return names
}

// page is one tools/list result as a crawler sees it.
type page struct {
	revision string
	names    []string
	next     string
}

func listPage(t *testing.T, cs *mcp.ClientSession, cursor string) (page, error) {
	t.Helper()
	res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: cursor})
	if err != nil {
		return page{}, err
	}
	p := page{next: res.NextCursor}
	if rev, ok := res.Meta[revision.MetaKey].(string); ok {
		p.revision = rev
	}
	for _, tool := range res.Tools {
		p.names = append(p.names, tool.Name)
	}
	return p, nil
}

// walk lists every page from the start and fails the test on an error.
func walk(t *testing.T, cs *mcp.ClientSession) []page {
	t.Helper()
	var pages []page
	cursor := ""
	for {
		p, err := listPage(t, cs, cursor)
		if err != nil {
			t.Fatalf("tools/list after %d pages: %v", len(pages), err)
		}
		pages = append(pages, p)
		if p.next == "" {
			return pages
		}
		if len(pages) > 10_000 {
			t.Fatal("more than 10000 pages")
		}
		cursor = p.next
	}
}

func wantInvalidParams(t *testing.T, err error) {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("error = %v (%T), want a JSON-RPC error", err, err)
	}
	if werr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("error code = %d (%s), want %d (invalid params)", werr.Code, werr.Message, jsonrpc.CodeInvalidParams)
	}
}

func TestEveryPageCarriesTheRevisionAndAWalkListsEveryToolOnce(t *testing.T) {
	cases := []struct {
		tools, pageSize, wantPages int
	}{
		{tools: 0, pageSize: 3, wantPages: 1},
		{tools: 1, pageSize: 3, wantPages: 1},
		{tools: 3, pageSize: 3, wantPages: 1},
		{tools: 4, pageSize: 3, wantPages: 2},
		{tools: 250, pageSize: 7, wantPages: 36},
		{tools: 1200, pageSize: 0, wantPages: 12}, // default page size, more than the SDK's own page
	}
	for _, tr := range transports {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/tools=%d/page=%d", tr.name, tc.tools, tc.pageSize), func(t *testing.T) {
				if testing.Short() && tc.tools > 250 {
					t.Skip("large catalog")
				}
				server, catalog := newServer(t, tc.pageSize, toolNames(tc.tools)...)
				cs := tr.connect(t, server, tr.version)
				if got := cs.InitializeResult().ProtocolVersion; got != tr.want {
					t.Fatalf("negotiated protocol version %s, want %s", got, tr.want)
				}
				pages := walk(t, cs)
				if len(pages) != tc.wantPages {
					t.Errorf("%d pages, want %d", len(pages), tc.wantPages)
				}
				var got []string
				for i, p := range pages {
					if p.revision != catalog.Revision() {
						t.Errorf("page %d revision %q, want %q", i+1, p.revision, catalog.Revision())
					}
					got = append(got, p.names...)
				}
				if want := toolNames(tc.tools); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
					t.Errorf("walk listed %d tools %v..., want each of %d exactly once", len(got), head(got), len(want))
				}
			})
		}
	}
}

func head(s []string) []string { return s[:min(len(s), 5)] }

func TestTamperedCursorIsInvalidParams(t *testing.T) {
	server, _ := newServer(t, 2, toolNames(7)...)
	other, err := revision.NewCursorCodec([]byte("another key, another server...."))
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			cs := tr.connect(t, server, tr.version)
			first, err := listPage(t, cs, "")
			if err != nil {
				t.Fatal(err)
			}
			flipped := []byte(first.next)
			flipped[len(flipped)/2] ^= 1
			cursors := map[string]string{
				"one bit flipped":         string(flipped),
				"truncated":               first.next[:len(first.next)-2],
				"extended":                first.next + "AA",
				"signed with another key": other.Encode(first.revision, 2),
				"not base64":              "!!not a cursor!!",
				"the SDK's own cursor":    sdkCursor(t),
			}
			for name, cursor := range cursors {
				t.Run(name, func(t *testing.T) {
					_, err := listPage(t, cs, cursor)
					wantInvalidParams(t, err)
				})
			}
		})
	}
}

func TestCursorFromBeforeAChangeIsInvalidParams(t *testing.T) {
	changes := map[string]func(c *revision.Catalog){
		"tool added after the cursor": func(c *revision.Catalog) { addTool(c, "tool_99999", "new") },
		// A name-based cursor would silently skip this one.
		"tool inserted before the cursor": func(c *revision.Catalog) { addTool(c, "tool_00000a", "new") },
		"tool removed":                    func(c *revision.Catalog) { c.RemoveTools("tool_00005") },
		"description changed":             func(c *revision.Catalog) { addTool(c, "tool_00001", "now also repairs") },
		"empty change":                    func(c *revision.Catalog) { c.Change(func(*mcp.Server) {}) },
	}
	for _, tr := range transports {
		for name, change := range changes {
			t.Run(tr.name+"/"+name, func(t *testing.T) {
				server, catalog := newServer(t, 3, toolNames(7)...)
				cs := tr.connect(t, server, tr.version)
				first, err := listPage(t, cs, "")
				if err != nil {
					t.Fatal(err)
				}
				before := catalog.Revision()
				change(catalog)
				if catalog.Revision() == before {
					t.Fatalf("revision still %q after the change", before)
				}
				_, err = listPage(t, cs, first.next)
				wantInvalidParams(t, err)

				// Starting over works and shows the new revision on every page.
				for i, p := range walk(t, cs) {
					if p.revision != catalog.Revision() {
						t.Errorf("page %d of the new walk has revision %q, want %q", i+1, p.revision, catalog.Revision())
					}
				}
			})
		}
	}
}

func TestInsertedToolIsNeverMissedByAWholeWalk(t *testing.T) {
	// The SDK's name-based cursor skips a tool inserted before it mid-walk.
	// With revision-bound cursors the walk either fails (-32602) or, when
	// redone, lists the new tool.
	server, catalog := newServer(t, 2, "b", "d", "f", "h")
	cs := connectInMemory(t, server, "2025-11-25")
	first, err := listPage(t, cs, "")
	if err != nil {
		t.Fatal(err)
	}
	addTool(catalog, "a", "inserted before the cursor")
	if _, err := listPage(t, cs, first.next); err == nil {
		t.Fatal("the walk went on after a tool was inserted before its cursor")
	}
	var names []string
	for _, p := range walk(t, cs) {
		names = append(names, p.names...)
	}
	if want := []string{"a", "b", "d", "f", "h"}; !slices.Equal(names, want) {
		t.Fatalf("new walk listed %v, want %v", names, want)
	}
}

func TestRevisionNeverRepeatsAcrossABAChange(t *testing.T) {
	_, catalog := newServer(t, 2, "a")
	seen := map[string]bool{catalog.Revision(): true}
	addTool(catalog, "a", "B")
	addTool(catalog, "a", "does a") // back to the original content
	catalog.RemoveTools("a")
	addTool(catalog, "a", "does a")
	for range 3 {
		rev := catalog.Revision()
		if seen[rev] {
			t.Fatalf("revision %q repeated", rev)
		}
		seen[rev] = true
		catalog.Change(func(*mcp.Server) {})
	}
}

func TestTwoCatalogsWithDistinctEpochsNeverShareARevision(t *testing.T) {
	mk := func(epoch string) *revision.Catalog {
		c, err := revision.New(mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil),
			revision.Options{Key: testKey, Epoch: epoch})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	before, after := mk("boot1"), mk("boot2") // a restart: the counter starts again
	if before.Revision() == after.Revision() {
		t.Fatalf("a restart reused revision %q", before.Revision())
	}
}

func TestCacheFieldsFromServerOptionsAreKept(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, &mcp.ServerOptions{
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
			c.TTLMs = 1 // short: the client caches by cursor for this long
			c.CacheScope = "private"
		},
	})
	catalog, err := revision.New(server, revision.Options{Key: testKey, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	addTool(catalog, "a", "a")
	addTool(catalog, "b", "b")
	cs := connectInMemory(t, server, "2026-07-28")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.CacheScope != "private" || res.TTLMs != 1 {
		t.Fatalf("cacheScope %q ttlMs %d, want private and 1", res.CacheScope, res.TTLMs)
	}
	if res.Meta[revision.MetaKey] != catalog.Revision() {
		t.Fatalf("revision %v, want %q", res.Meta[revision.MetaKey], catalog.Revision())
	}
}

func TestListChangedIsStillSentOnAChange(t *testing.T) {
	server, catalog := newServer(t, 2, "a")
	changed := make(chan struct{}, 10)
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := client.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	addTool(catalog, "b", "b")
	// A bounded wait (the kit's module does not take platform/servicetest
	// and its Redis client just for this).
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed within 10s of a change")
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	cases := map[string]revision.Options{
		"no key":             {},
		"short key":          {Key: []byte("short")},
		"negative page size": {Key: testKey, PageSize: -1},
		"epoch too long":     {Key: testKey, Epoch: string(make([]byte, revision.MaxRevisionLength))},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := revision.New(server, opts); err == nil {
				t.Fatal("New accepted the options")
			}
		})
	}
	if _, err := revision.New(nil, revision.Options{Key: testKey}); err == nil {
		t.Fatal("New accepted a nil server")
	}
}

// sdkCursor returns a cursor the SDK's own name-based pagination minted.
func sdkCursor(t *testing.T) string {
	t.Helper()
	plain := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, &mcp.ServerOptions{PageSize: 1})
	for _, name := range []string{"a", "b"} {
		plain.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	p, err := listPage(t, connectInMemory(t, plain, "2025-11-25"), "")
	if err != nil || p.next == "" {
		t.Fatalf("the SDK gave no cursor: %v", err)
	}
	return p.next
}
