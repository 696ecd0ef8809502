// Package executor makes an MCP server built on
// github.com/modelcontextprotocol/go-sdk run `tools/call` only for a caller
// holding a toolcrib execution lease (DESIGN §7a, I9), so leases protect
// servers that opt in, not only toolcrib's own gateway.
//
// Opting in takes a few lines:
//
//	server := mcp.NewServer(&mcp.Implementation{Name: "inventory", Version: "1.0.0"}, nil)
//	err := executor.Require(server, executor.Options{
//		ServerID: "inventory",              // tool ids are <server id>.<tool name>
//		Audience: "executor.inventory",     // this executor, as leases name it
//		Keys:     keys,                     // the lease service's JWKS (GetSigningKeys)
//		RefreshKeys: refresh,               // optional: refetch once for a newly rotated key
//		Redeemer: redeemer,                 // the lease service's Redeem, for single use
//	})
//
// Every `tools/call` must then carry the lease and a fresh holder proof in
// its `_meta` ([lease.MetaLease], [lease.MetaProof]; [Attach] sets them on
// the client side). The call's lease is checked offline against the key set
// with [lease.Check] — signature, expiry, audience, tool, argument digest,
// proof — and then its verified claims are handed to the Redeemer
// (LeaseService.Redeem, called with the executor's service identity), which
// checks revocation, frozen issuance and freshness and consumes the lease
// (single use across every lease replica); no signature is checked twice.
// A Verifier (LeaseService.Verify, which checks both signatures again) is
// still accepted in its place, for older wiring. A refused call never
// reaches the tool: it returns a tool error (`isError: true`) whose text
// names the failure and whose `_meta[`[lease.MetaFailure]`]` is the failure's
// name, e.g. `ALREADY_USED`. When the Redeemer cannot answer, the call is
// refused too (fail closed).
//
// Without a Redeemer (or Verifier) the server still refuses a lease it has
// seen before, but only within its own process; give it a Redeemer
// whenever more than one process could be presented the same lease.
package executor
