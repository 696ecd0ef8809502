// Package e2e holds whole-suite tests that start the real services with
// their Run functions on random loopback ports, the discovery fault suite,
// and the MCP test servers (fixtures) they crawl.
package e2e
