// Package intake feeds the registry with the tools discovery commits. It
// follows DiscoveryService.Watch from the revision the registry stored last
// (resumable across restarts), fetches the snapshot each pointer move names
// and applies it to the store ([store.Store.ApplyPointer]): unseen tools
// appear pending review and disabled without anyone calling anything, a
// changed descriptor makes a reviewed tool unreviewed, a tool no longer
// listed is marked absent at the source.
//
// The loop runs on the shared follower ([changelog.Follower]): it resumes
// from the stored cursor after a broken stream (backoff with jitter, a
// stalled stream dropped), and heartbeats advance the cursor. With no
// cursor stored (a new registry), or when discovery answers
// REVISION_COMPACTED or REVISION_AHEAD (the registry was away longer than
// discovery keeps moves, or discovery was restored), the loop re-reads the
// active pointer and snapshot of every (server, audience class) it knows,
// then watches again from 0 — the oldest move discovery still keeps. Each pair records the
// discovery revision of the last move applied to it, so the moves replayed
// that way are skipped without fetching their snapshots, and any move
// committed during the re-read is still delivered: no gap.
package intake
