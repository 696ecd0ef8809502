package revision

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MetaKey is the `_meta` key under which every `tools/list` result carries
// the catalog revision, a string.
const MetaKey = "dev.toolcrib/catalog-revision"

// DefaultPageSize is the number of tools per `tools/list` page when
// [Options.PageSize] is zero.
const DefaultPageSize = 100

const methodListTools = "tools/list"

// Options configure a [Catalog].
type Options struct {
	// Key signs cursors (HMAC-SHA256); at least [MinKeyLength] bytes.
	// Required. Keep it secret: whoever holds it can mint cursors.
	Key []byte
	// PageSize is the number of tools per page; 0 means [DefaultPageSize].
	PageSize int
	// Epoch starts every revision string, so that revisions never repeat
	// across restarts of the server. Empty means the start time in
	// milliseconds since 1970, base 36. Set it (e.g. to a deployment id
	// that never repeats) when several replicas must agree on revisions;
	// they then also need the same tools, changes and Key.
	Epoch string
}

// A Catalog gives an [mcp.Server]'s tool list a revision and serves
// `tools/list` by position from the list frozen for that revision, with
// revision-bound cursors. Create it with [New]; change tools only through
// it. A Catalog is safe for concurrent use.
type Catalog struct {
	server   *mcp.Server
	codec    *CursorCodec
	pageSize int
	epoch    string

	mu      sync.Mutex // serializes changes and snapshot builds
	counter atomic.Uint64
	snap    atomic.Pointer[snapshot] // frozen list of the current revision; nil until built
}

// snapshot is the tool list of one revision, in the SDK's stable order.
type snapshot struct {
	revision string
	tools    []*mcp.Tool
}

// New installs a Catalog on server as a receiving middleware intercepting
// `tools/list`, and returns it. Call it before connecting any client, and
// before adding middleware that should see only real requests: middleware
// added after New wraps it, middleware added before sees the internal
// `tools/list` calls the Catalog makes to read the server's tools.
func New(server *mcp.Server, opts Options) (*Catalog, error) {
	if server == nil {
		return nil, errors.New("revision: nil server")
	}
	codec, err := NewCursorCodec(opts.Key)
	if err != nil {
		return nil, err
	}
	if opts.PageSize < 0 {
		return nil, fmt.Errorf("revision: negative page size %d", opts.PageSize)
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.Epoch == "" {
		opts.Epoch = strconv.FormatInt(time.Now().UnixMilli(), 36)
	}
	if len(opts.Epoch)+21 > MaxRevisionLength {
		return nil, fmt.Errorf("revision: epoch longer than %d bytes", MaxRevisionLength-21)
	}
	c := &Catalog{server: server, codec: codec, pageSize: opts.PageSize, epoch: opts.Epoch}
	c.counter.Store(1)
	server.AddReceivingMiddleware(c.middleware)
	return c, nil
}

// Revision returns the current catalog revision: the epoch and a counter,
// e.g. `m3x0k2a1.7`. It changes on every change made through the Catalog.
func (c *Catalog) Revision() string {
	return c.epoch + "." + strconv.FormatUint(c.counter.Load(), 10)
}

// Change runs fn, which may add, replace and remove any number of tools on
// the server directly, and then moves the revision once. Clients listing
// concurrently see either the old revision or the new one, never a mix
// under one revision. fn must not call back into the Catalog. The revision
// moves even if fn panics, since fn may have changed some tools first.
func (c *Catalog) Change(fn func(server *mcp.Server)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() {
		c.counter.Add(1)
		c.snap.Store(nil)
	}()
	fn(c.server)
}

// AddTool adds t, or replaces the tool of the same name, as
// [mcp.Server.AddTool] does, and moves the revision.
func (c *Catalog) AddTool(t *mcp.Tool, h mcp.ToolHandler) {
	c.Change(func(s *mcp.Server) { s.AddTool(t, h) })
}

// AddTool adds t with a typed handler, or replaces the tool of the same
// name, as [mcp.AddTool] does (inferring schemas from In and Out), and moves
// the catalog's revision.
func AddTool[In, Out any](c *Catalog, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	c.Change(func(s *mcp.Server) { mcp.AddTool(s, t, h) })
}

// RemoveTools removes the named tools, as [mcp.Server.RemoveTools] does,
// and moves the revision.
func (c *Catalog) RemoveTools(names ...string) {
	c.Change(func(s *mcp.Server) { s.RemoveTools(names...) })
}

func (c *Catalog) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != methodListTools {
			return next(ctx, method, req)
		}
		lreq, ok := req.(*mcp.ListToolsRequest)
		if !ok {
			return next(ctx, method, req)
		}
		return c.list(ctx, next, lreq)
	}
}

// list answers one `tools/list` request.
func (c *Catalog) list(ctx context.Context, next mcp.MethodHandler, req *mcp.ListToolsRequest) (mcp.Result, error) {
	var cursor string
	if req.Params != nil {
		cursor = req.Params.Cursor
	}
	// The SDK's own answer to a first-page request runs the server's
	// ServerOptions.SetCacheable for this request: keep its ttlMs and
	// cacheScope.
	first, err := c.sdkPage(ctx, next, req, "")
	if err != nil {
		return nil, err
	}
	snap, err := c.snapshot(ctx, next, req)
	if err != nil {
		return nil, err
	}
	pos := 0
	if cursor != "" {
		rev, p, err := c.codec.Decode(cursor)
		if err != nil {
			return nil, invalidParams("invalid cursor: list again from the start")
		}
		if rev != snap.revision {
			return nil, invalidParams(fmt.Sprintf(
				"cursor is from catalog revision %q, the catalog is now at revision %q: list again from the start",
				rev, snap.revision))
		}
		if p <= 0 || p >= len(snap.tools) {
			return nil, invalidParams("invalid cursor: list again from the start")
		}
		pos = p
	}
	end := min(pos+c.pageSize, len(snap.tools))
	res := &mcp.ListToolsResult{
		Meta:      mcp.Meta{MetaKey: snap.revision},
		Cacheable: first.Cacheable,
		Tools:     snap.tools[pos:end:end],
	}
	if end < len(snap.tools) {
		res.NextCursor = c.codec.Encode(snap.revision, end)
	}
	return res, nil
}

// snapshot returns the frozen list of the current revision, reading the
// server's tools through the SDK when the revision moved since the last
// read.
func (c *Catalog) snapshot(ctx context.Context, next mcp.MethodHandler, req *mcp.ListToolsRequest) (*snapshot, error) {
	if s := c.snap.Load(); s != nil {
		return s, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.snap.Load(); s != nil {
		return s, nil
	}
	tools := []*mcp.Tool{}
	seen := map[string]bool{}
	for cursor := ""; ; {
		page, err := c.sdkPage(ctx, next, req, cursor)
		if err != nil {
			return nil, err
		}
		tools = append(tools, page.Tools...)
		if page.NextCursor == "" {
			break
		}
		if seen[page.NextCursor] {
			return nil, fmt.Errorf("revision: the server's own tools/list repeated cursor %q", page.NextCursor)
		}
		seen[page.NextCursor] = true
		cursor = page.NextCursor
	}
	s := &snapshot{revision: c.Revision(), tools: tools}
	c.snap.Store(s)
	return s, nil
}

// sdkPage asks the handler the Catalog wraps (ultimately the SDK) for one
// page of its name-ordered tool list.
func (c *Catalog) sdkPage(ctx context.Context, next mcp.MethodHandler, req *mcp.ListToolsRequest, cursor string) (*mcp.ListToolsResult, error) {
	params := &mcp.ListToolsParams{Cursor: cursor}
	if req.Params != nil {
		params.Meta = req.Params.Meta
	}
	res, err := next(ctx, methodListTools, &mcp.ListToolsRequest{Session: req.Session, Params: params, Extra: req.Extra})
	if err != nil {
		return nil, err
	}
	page, ok := res.(*mcp.ListToolsResult)
	if !ok {
		return nil, fmt.Errorf("revision: tools/list answered %T, want *mcp.ListToolsResult", res)
	}
	return page, nil
}

func invalidParams(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}
