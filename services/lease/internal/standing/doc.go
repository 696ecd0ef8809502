// Package standing is a lease replica's in-memory view of revocations and
// issuance freezes, so Verify reads no Postgres row per call.
//
// The view is reloaded from Postgres every [Options.Reload] and at once
// when a `lease_changes` NOTIFY arrives (migration 0003 sends one for every
// committed change), and by the replica itself right after its own Revoke
// or FreezeIssuance commits. A load proves the view holds every change
// committed before it started. When the newest load started longer ago
// than [Options.Window] (Postgres unreachable, the reload loop stuck), the
// view is stale and [View.Status] reads Postgres instead, failing with its
// error: never an answer from a stale view.
package standing
