// Package gateway is toolcrib's MCP gateway (DESIGN §7b): an MCP server on
// streamable HTTP (stateless) that any MCP client points at, so a host that
// does not speak gRPC gets every guarantee of the control plane.
//
//   - The client's bearer token is the principal: verified against the same
//     JWKS, issuer and audience as every toolcrib service; a request without
//     a valid token is answered 401 with a WWW-Authenticate challenge naming
//     the OAuth protected-resource metadata
//     (/.well-known/oauth-protected-resource). The token is presented to
//     admission and the lease service (toolcrib's own services), never to an
//     upstream MCP server: upstream credentials come from the audience
//     class's secret reference.
//   - `tools/list` is the principal's visible set (AdmissionService
//     ListVisibleTools), paged with revision-bound cursors whose revision is
//     the visible-set digest; `notifications/tools/list_changed` is sent when
//     that digest changes.
//   - `tools/call` runs the pipeline: runtime view → Check → confirmation
//     (input-required result) → Check as USER_CONFIRMED, asserted with the
//     gateway's own confirmer token (--confirmer-token-file) beside the
//     user's and the digest of what it showed → lease Issue with
//     the gateway's holder key → upstream call with lease and proof in
//     `_meta` → result policy (projection, required evidence, output schema,
//     size budget with the artifact store) → answer. Every denial is a tool
//     result with `isError: true` naming the reason; a dependency that
//     cannot answer is an error result too, never a pass.
//
// [Run] serves it; health (gRPC) and metrics listen as in every service.
package gateway
