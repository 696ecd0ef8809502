// Package upstream adapts the registry's and discovery's gRPC APIs to the
// replica's consumer-side interfaces, maps their errors at this edge
// (NOT_FOUND → replica.ErrNotFound), and follows their Watch streams into
// the heads.
//
// What each adapter uses:
//   - [Registry.Current]: RegistryService.GetPolicy (current epoch).
//   - [Registry.PolicyAt]: GetPolicy with `at_epoch`, from the registry's
//     policy history; OUT_OF_RANGE EPOCH_BEFORE_HISTORY is
//     replica.ErrNotKept (a denial is then FORBIDDEN, never POLICY_REVOKED),
//     EPOCH_NOT_REACHED an error.
//   - [Registry.Review]: RegistryService.GetToolReview (tool id, exact
//     descriptor digest, audience class): approved, enabled and the current
//     contract, read at the class's tenant's epoch.
//   - [Discovery.Generation]: DiscoveryService.GetSnapshot.
//   - [Discovery.Pointer]: DiscoveryService.GetActiveSnapshot.
//   - [Discovery.Bind]: DiscoveryService.BindGeneration, queued.
//   - [RegistryFollower], [DiscoveryFollower]: the two Watch streams through
//     the shared follower of platform/changelog; the heads read each
//     stream's newest heartbeat from its follower's Freshness (I8).
package upstream
