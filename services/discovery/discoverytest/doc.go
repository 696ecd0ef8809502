// Package discoverytest holds test support for discovery and its users:
// go-sdk MCP servers whose `tools/list` is scripted (in-memory, streamable
// HTTP with or without TLS, and a stdio binary), a paged catalog with
// revision-bound cursors, an in-process fake of the registry's gRPC API,
// and a discovery worker in a child process for tests that kill one
// ([StartChild], [RunChild]).
//
// The scripted servers answer tools/list below the go-sdk's typed layer, so
// a test controls every byte of a result (unknown fields, empty-string
// cursors, malformed tools) and the exact wire order of a
// `notifications/tools/list_changed` relative to a page.
package discoverytest
