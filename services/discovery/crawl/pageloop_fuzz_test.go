package crawl_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// pageScript is a server whose answers are decoded from fuzz input: the
// answer to call n (from 0) comes from bytes 1+3n..3+3n, whatever the
// request's cursor was. A missing triple is a last page at revision r1
// with one tool.
//
//	byte 0: nextCursor: 0 absent, 1 "", 2..7 "c2".."c7" (so repeats and
//	        cycles are likely); 8..9 a JSON-RPC error (-32602, -32603)
//	byte 1: revision: 0 none, otherwise "r1".."r3"
//	byte 2: tools on the page: count (low 2 bits) and the first tool's
//	        number (the rest), so pages may repeat tools
type pageScript struct {
	data []byte

	mu    sync.Mutex
	calls []pageAnswer
}

type pageAnswer struct {
	cursor *string
	tools  []string
}

func (p *pageScript) List(call int, cursor *string) discoverytest.Reply {
	b := []byte{0, 1, 1}
	if off := 1 + 3*call; off+3 <= len(p.data) {
		b = p.data[off : off+3]
	}
	next, rev, shape := int(b[0]%10), int(b[1]%4), int(b[2])
	var tools []string
	for k := range shape & 3 {
		tools = append(tools, fmt.Sprintf("t%d", shape>>2+k))
	}
	p.mu.Lock()
	p.calls = append(p.calls, pageAnswer{cursor: cursor, tools: tools})
	p.mu.Unlock()
	switch next {
	case 8:
		return discoverytest.Reply{Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor"}}
	case 9:
		return discoverytest.Reply{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "boom"}}
	}
	raw := make([]string, len(tools))
	for i, name := range tools {
		raw[i] = string(discoverytest.Tool(name))
	}
	res := `{"tools":[` + strings.Join(raw, ",") + `]`
	switch {
	case next == 1:
		res += `,"nextCursor":""`
	case next >= 2:
		res += fmt.Sprintf(`,"nextCursor":"c%d"`, next)
	}
	if rev > 0 {
		res += fmt.Sprintf(`,"_meta":{%q:"r%d"}`, discoverytest.RevisionKey, rev)
	}
	return discoverytest.Reply{Result: json.RawMessage(res + "}")}
}

// FuzzCrawlPages drives the crawl's own page loop (cursors, revisions,
// caps, the closing re-check) with servers decoded from fuzz input, and
// checks what any outcome must satisfy: a whole catalog followed one
// cursor chain without repeats, carried one revision on every page and
// the re-check (when versioned), stayed within the caps, read the pages
// it reports, and re-checked page 1; a fault has one of the page loop's
// reasons. Byte 0 of the input selects the options: versioned (bit 0),
// protocol 2026-07-28 or 2025-11-25 (bit 1), page cap 1–8 (bits 2–4), tool
// cap 1–8 (bits 5–7).
func FuzzCrawlPages(f *testing.F) {
	for _, sc := range pageLoopSeeds {
		f.Add(sc.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 || len(data) > 1+3*12 {
			return
		}
		crawlPages(t, data)
	})
}

// crawlPages crawls the server of data with the options of data[0] and
// checks the outcome.
func crawlPages(t *testing.T, data []byte) *crawl.Result {
	t.Helper()
	o := crawl.Options{Versioned: data[0]&1 != 0, MaxPages: 1 + int(data[0]>>2&7), MaxTools: 1 + int(data[0]>>5&7)}
	version := "2025-11-25"
	if data[0]&2 != 0 {
		version = "2026-07-28"
	}
	srv := &pageScript{data: data}
	target, _ := inMemory(t, srv, discoverytest.ServerOptions{Versions: []string{version}})
	r := crawl.Crawl(ctx(t), target, o)
	checkPageLoop(t, r, o, version, srv)
	return r
}

// pageLoopSeeds are FuzzCrawlPages's seed corpus, each with the outcome it
// must reach (TestCrawlPagesSeeds).
var pageLoopSeeds = []struct {
	name   string
	data   []byte
	state  catalogv1.DiscoveryState
	reason discoveryv1.RunReason
}{
	{"three pages", []byte{0xff, 2, 1, 1, 3, 1, 1 | 1<<2, 0, 1, 1 | 2<<2, 2, 1, 1}, proven, 0},
	{"c2 twice: repeated cursor", []byte{0xff, 2, 1, 1, 2, 1, 5}, incomplete, discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR},
	{"c2 c3 c2: a cycle", []byte{0xff, 2, 1, 1, 3, 1, 1, 2, 1, 1}, incomplete, discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE},
	{`2026-07-28: "" on page 1 leads back to it`, []byte{0xff, 1, 1, 1}, incomplete, discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR},
	{`2025-11-25: "" ends the list`, []byte{0xfd, 1, 1, 1, 0, 1, 1}, proven, 0},
	{"another revision on page 2", []byte{0xff, 2, 1, 1, 3, 2, 1, 0, 1, 1}, incomplete, discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH},
	{"-32602 for page 2's cursor", []byte{0xff, 2, 1, 1, 8, 1, 1}, incomplete, discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH},
	{"-32602 for page 2's cursor, unversioned", []byte{0xfe, 2, 0, 1, 8, 0, 1}, incomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR},
	{"a page cap of 1", []byte{0x03, 2, 1, 1, 0, 1, 1}, incomplete, discoveryv1.RunReason_RUN_REASON_PAGE_CAP},
	{"a tool cap of 1", []byte{0x07, 2, 1, 1, 0, 1, 1}, incomplete, discoveryv1.RunReason_RUN_REASON_TOOL_CAP},
	{"the re-check lists other tools", []byte{0xff, 0, 1, 1 | 7<<2, 0, 1, 1}, incomplete, discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH},
	{"the re-check cuts page 1 differently", []byte{0xff, 2, 1, 1, 0, 1, 1 | 1<<2, 2, 1, 1}, proven, 0},
}

// TestCrawlPagesSeeds: each seed of FuzzCrawlPages reaches the outcome it
// stands for.
func TestCrawlPagesSeeds(t *testing.T) {
	for _, sc := range pageLoopSeeds {
		t.Run(sc.name, func(t *testing.T) {
			want(t, crawlPages(t, sc.data), sc.state, sc.reason)
		})
	}
}

func checkPageLoop(t *testing.T, r *crawl.Result, o crawl.Options, version string, srv *pageScript) {
	t.Helper()
	srv.mu.Lock()
	calls := append([]pageAnswer(nil), srv.calls...)
	srv.mu.Unlock()
	if r.ProtocolVersion != version {
		t.Fatalf("negotiated %q, want %q", r.ProtocolVersion, version)
	}
	if !r.Whole() {
		switch r.Reason {
		case discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH, discoveryv1.RunReason_RUN_REASON_REVISION_MISSING,
			discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR, discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE,
			discoveryv1.RunReason_RUN_REASON_PAGE_CAP, discoveryv1.RunReason_RUN_REASON_TOOL_CAP,
			discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR:
		default:
			t.Fatalf("a fault of the page loop ended %v %v (%s)", r.State, r.Reason, r.Detail)
		}
		if r.State != catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE || r.PageRoot != "" {
			t.Fatalf("%v %v with page root %q", r.State, r.Reason, r.PageRoot)
		}
		if r.Reason == discoveryv1.RunReason_RUN_REASON_REVISION_MISSING && !o.Versioned {
			t.Fatal("an unversioned crawl asked for revisions")
		}
		return
	}
	if want := map[bool]catalogv1.DiscoveryState{true: catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN,
		false: catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION}[o.Versioned]; r.State != want || r.Reason != discoveryv1.RunReason_RUN_REASON_UNSPECIFIED {
		t.Fatalf("a whole crawl ended %v %v, want %v", r.State, r.Reason, want)
	}
	if len(r.Pages) == 0 || len(r.Pages) > o.MaxPages || len(r.Tools) > o.MaxTools || len(calls) != len(r.Pages)+1 {
		t.Fatalf("%d pages (cap %d), %d tools (cap %d), %d calls", len(r.Pages), o.MaxPages, len(r.Tools), o.MaxTools, len(calls))
	}
	seen := map[string]bool{}
	if version >= "2026-07-28" {
		seen[""] = true
	}
	var tools []string
	for i, p := range r.Pages {
		in := calls[i].cursor
		if (i == 0) != (in == nil) || (i > 0 && *in != r.Pages[i-1].CursorOut) || (in != nil && p.CursorIn != *in) {
			t.Fatalf("page %d was asked for with cursor %v; the chain is %+v", i, in, r.Pages)
		}
		if o.Versioned && (!p.HasRevision || p.Revision != r.Revision) {
			t.Fatalf("page %d of a proven catalog carries revision %q (%v), page 0 %q", i, p.Revision, p.HasRevision, r.Revision)
		}
		if p.HasNext == (i == len(r.Pages)-1) {
			t.Fatalf("page %d of %d has next %v", i, len(r.Pages), p.HasNext)
		}
		if p.HasNext {
			if seen[p.CursorOut] {
				t.Fatalf("a whole crawl followed cursor %q twice", p.CursorOut)
			}
			seen[p.CursorOut] = true
		}
		tools = append(tools, calls[i].tools...)
	}
	if recheck := calls[len(calls)-1]; recheck.cursor != nil {
		t.Fatalf("the closing re-check carried cursor %q", *recheck.cursor)
	} else if o.Versioned && r.ClosingRevision != r.Revision {
		t.Fatalf("proven with closing revision %q, page 0 %q", r.ClosingRevision, r.Revision)
	} else if len(recheck.tools) > len(tools) || strings.Join(recheck.tools, ",") != strings.Join(tools[:len(recheck.tools)], ",") {
		t.Fatalf("the re-check listed %v, not a prefix of the walk's %v", recheck.tools, tools)
	}
	if len(r.Tools) != len(tools) {
		t.Fatalf("%d tools kept, the pages listed %d", len(r.Tools), len(tools))
	}
}
