// Package changelog is the resumable, gapless change log behind every
// toolcrib Watch RPC (registry and discovery).
//
// A change is appended inside the transaction that makes it, so it is
// visible exactly when the change commits. Revisions come from a one-row
// counter updated in that transaction: the row lock orders writers, so
// revisions are gapless and commit in revision order, and a reader that has
// seen revision N has seen every change up to N. PostgreSQL NOTIFY wakes
// watchers at commit; a poll on every heartbeat covers a lost notification.
//
// Old entries are compacted; a watcher asking to resume from a compacted
// revision gets [ErrCompacted] and must re-list.
package changelog
