package discoverytest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// RevisionKey is the `_meta` key carrying the catalog revision.
const RevisionKey = "dev.toolcrib/catalog-revision"

// Tool returns a simple, valid tool object: the name, a description and an
// object input schema with one string property.
func Tool(name string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"name":%q,"description":"Test tool %s.","inputSchema":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}`, name, name))
}

// Tools returns n tools named `<prefix>_<i>`.
func Tools(prefix string, n int) []json.RawMessage {
	out := make([]json.RawMessage, n)
	for i := range n {
		out[i] = Tool(fmt.Sprintf("%s_%d", prefix, i))
	}
	return out
}

// Catalog is a mutable, paged tool list with an optional revision. Cursors
// are `<offset>@<revision>`; a cursor of another revision is refused with
// JSON-RPC -32602, like a revision-bound cursor.
type Catalog struct {
	mu sync.Mutex
	// Pages of this many tools; 0 means all tools on one page.
	PageSize int
	// Revision is put in every page's `_meta`; empty sends none.
	Revision string
	// CacheScope and TTLMs are added to every result when set.
	CacheScope string
	TTLMs      int
	// OnList, when set, runs before each answer is built (under the
	// catalog's lock) and may change the catalog or the reply options.
	OnList func(c *Catalog, call int, cursor *string, r *Reply)
	// EmptyCursorPage, when 2 or more, makes the nextCursor of that page
	// (from 1) the empty string (a valid cursor since 2026-07-28), standing
	// for the offset after it; an explicit `"cursor": ""` is then answered
	// with the next page. (The first page's absent cursor is also "" to a
	// server, so page 1 cannot use it.)
	EmptyCursorPage int

	tools []json.RawMessage
}

// NewCatalog returns a catalog of tools.
func NewCatalog(revision string, pageSize int, tools ...json.RawMessage) *Catalog {
	return &Catalog{Revision: revision, PageSize: pageSize, tools: tools}
}

// SetTools replaces the tools (and the revision when rev is not empty).
func (c *Catalog) SetTools(rev string, tools ...json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(rev, tools)
}

func (c *Catalog) setLocked(rev string, tools []json.RawMessage) {
	c.tools = tools
	if rev != "" {
		c.Revision = rev
	}
}

// Set replaces the tools from within OnList (the lock is held there).
func (c *Catalog) Set(rev string, tools ...json.RawMessage) { c.setLocked(rev, tools) }

// Snapshot returns the current tools.
func (c *Catalog) Snapshot() []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]json.RawMessage(nil), c.tools...)
}

// List implements [Lister].
func (c *Catalog) List(call int, cursor *string) Reply {
	c.mu.Lock()
	defer c.mu.Unlock()
	var r Reply
	if c.OnList != nil {
		c.OnList(c, call, cursor, &r)
		if r.Result != nil || r.Error != nil {
			return r
		}
	}
	offset := 0
	if cursor != nil {
		if *cursor == "" && c.EmptyCursorPage >= 2 {
			offset = c.EmptyCursorPage * c.size()
		} else {
			off, rev, ok := strings.Cut(*cursor, "@")
			n, err := strconv.Atoi(off)
			if !ok || err != nil || rev != c.Revision || n < 0 || n > len(c.tools) {
				r.Error = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid or outdated cursor"}
				return r
			}
			offset = n
		}
	}
	end := len(c.tools)
	if c.PageSize > 0 && offset+c.PageSize < end {
		end = offset + c.PageSize
	}
	res := map[string]any{"tools": c.tools[offset:end]}
	if end < len(c.tools) {
		if c.EmptyCursorPage >= 2 && end == c.EmptyCursorPage*c.size() {
			res["nextCursor"] = ""
		} else {
			res["nextCursor"] = fmt.Sprintf("%d@%s", end, c.Revision)
		}
	}
	if c.Revision != "" {
		res["_meta"] = map[string]any{RevisionKey: c.Revision}
	}
	if c.CacheScope != "" {
		res["cacheScope"] = c.CacheScope
	}
	if c.TTLMs != 0 {
		res["ttlMs"] = c.TTLMs
	}
	b, err := json.Marshal(res)
	if err != nil {
		panic(err)
	}
	r.Result = b
	return r
}

func (c *Catalog) size() int {
	if c.PageSize > 0 {
		return c.PageSize
	}
	return len(c.tools)
}

// DeepTool returns a tool whose input schema nests `levels` objects deep
// (each level a `properties` map of one property): beyond the go-sdk's
// decoding limit from about 500 levels on.
func DeepTool(name string, levels int) json.RawMessage {
	schema := strings.Repeat(`{"type":"object","properties":{"a":`, levels) + `{"type":"string"}` + strings.Repeat(`}}`, levels)
	return json.RawMessage(fmt.Sprintf(`{"name":%q,"description":"A tool with a deep schema.","inputSchema":%s}`, name, schema))
}
