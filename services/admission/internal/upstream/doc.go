// Package upstream adapts the registry's and discovery's gRPC APIs to the
// replica's consumer-side interfaces, maps their errors at this edge
// (NOT_FOUND → replica.ErrNotFound), and follows their Watch streams into
// the heads.
//
// What each adapter uses, and what it waits for:
//   - [Registry.Current]: RegistryService.GetPolicy (exists).
//   - [Registry.PolicyAt]: GetPolicy answers only the current epoch, so an
//     older epoch is replica.ErrNotKept (a denial is then FORBIDDEN, never
//     POLICY_REVOKED, unless this replica read the policy at that epoch
//     itself). Needs: GetPolicy at a past epoch (tenancy helper).
//   - [Registry.Review]: interim, from RegistryService.GetTool (current
//     state; safe because every change to a tool's enablement, contract or
//     approvals bumps the epoch, and reviews are cached per epoch). Needs:
//     the review RPC "is this exact descriptor digest approved under the
//     current contract for this tenant's audience class, and is the tool
//     enabled, at epoch E" (review helper), which also answers per-tenant
//     review variants.
//   - [Discovery.Generation]: DiscoveryService.GetSnapshot (exists).
//   - [Discovery.Pointer]: DiscoveryService.GetActiveSnapshot (exists).
//   - [Discovery.Bind]: DiscoveryService.BindGeneration (exists), queued.
//   - [FollowRegistry], [FollowDiscovery]: the two Watch streams (exist),
//     followed by a small loop here until the shared follower of
//     platform/changelog (watch helper) replaces it.
package upstream
