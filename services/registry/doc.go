// Package registry is the registry service (DESIGN §2, §5): MCP servers,
// tenants and their policy epochs, audience classes, grants, and the
// owner-reviewed contracts of the tools discovery finds.
package registry
