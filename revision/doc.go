// Package revision lets the author of an MCP server built on
// github.com/modelcontextprotocol/go-sdk opt into proven catalogs.
//
// toolcrib's discovery service activates a server's tool catalog only when
// it can prove it read the whole catalog: every `tools/list` page and a
// closing re-check must carry the same source catalog revision in
// `_meta["dev.toolcrib/catalog-revision"]` ([MetaKey]). MCP itself has no
// cross-page snapshot token, and the SDK's built-in cursor is name-based,
// never expires and misses a tool inserted before it during paging.
//
// A [Catalog] fixes that with a receiving middleware on the server:
//
//   - every `tools/list` result carries the catalog's current revision;
//   - the revision changes on every tool added, replaced or removed through
//     the Catalog ([Catalog.AddTool], [AddTool], [Catalog.RemoveTools],
//     [Catalog.Change]) and never repeats, so an A-B-A change is visible;
//   - pages are cut by position from a list frozen per revision, and each
//     cursor is an HMAC'd (revision, position) pair ([CursorCodec]). A cursor
//     minted under an older revision, or a forged or garbled one, is answered
//     with JSON-RPC error -32602 (invalid params): the client must start over.
//
// Opting in takes a few lines:
//
//	server := mcp.NewServer(&mcp.Implementation{Name: "inventory", Version: "1.0.0"}, nil)
//	catalog, err := revision.New(server, revision.Options{Key: key})
//	if err != nil { ... }
//	revision.AddTool(catalog, &mcp.Tool{Name: "inventory.reserve", ...}, reserve)
//
// From then on, add, replace and remove tools through the Catalog, never
// through the server directly: a change the Catalog does not see does not
// move the revision, and the frozen list of the current revision would keep
// serving the old tools. The SDK still sends
// `notifications/tools/list_changed` for every change as usual.
package revision
