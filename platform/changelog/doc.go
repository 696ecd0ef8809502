// Package changelog is the resumable, gapless change log behind every
// toolcrib Watch RPC (registry and discovery), the one server of those
// RPCs, and the one follower of them.
//
// The log. A change is appended inside the transaction that makes it, so
// it is visible exactly when the change commits. Revisions come from a
// one-row counter updated in that transaction: the row lock orders writers,
// so revisions are gapless and commit in revision order, and a reader that
// has seen revision N has seen every change up to N. Each change records
// the tenants whose principals may see it. PostgreSQL NOTIFY wakes watchers
// at commit; a poll on every heartbeat covers a lost notification. Old
// entries are compacted ([Log.Compact]). [Memory] is the same [Feed] in
// memory, for the fakes tests run in place of a service.
//
// The server. [Server.Serve] implements the Watch contract both services
// document (0 = the oldest change kept, REVISION_COMPACTED, REVISION_AHEAD,
// heartbeats carrying the head, tenant filtering by [Viewer], UNAVAILABLE
// DRAINING on shutdown); each service only maps entries to its messages.
// Package watchtest checks the contract against every implementation.
//
// The follower. [Follower] lists, watches from the listed revision,
// resumes after a broken or stalled stream with backoff, re-lists after
// compaction and reports [Freshness] ("fresh up to revision R as of time
// T") from heartbeats. It reads a [Source]: [RegistrySource] and
// [DiscoverySource] adapt the gRPC clients.
package changelog
