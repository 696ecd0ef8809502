// Package mcpapi is the gateway's MCP surface: one go-sdk server per
// principal holding exactly its visible set, the tools/list pagination
// with revision-bound cursors, the tools/call pipeline (Check,
// confirmation, lease, upstream call, result policy), and the artifact
// resources.
package mcpapi
