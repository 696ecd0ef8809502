// Package inventory is the example MCP server (command
// e2e/cmd/exampleserver): four inventory and shipment tools opted into
// proven catalogs with the revision package, a loopback admin endpoint that
// changes a tool at runtime, and, when [Config.Lease] is set, the lease
// executor kit in front of every `tools/call`. [Serve] runs it; the command
// and the whole-suite tests start it the same way.
package inventory
