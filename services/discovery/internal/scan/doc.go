// Package scan runs discovery's scans as jobs on a Postgres queue
// (github.com/riverqueue/river, its tables in the `discovery` schema), so
// several discovery processes share the work without any leader election of
// their own.
//
// # Jobs
//
//   - `discovery_scan` scans one (server, audience class). It is unique by
//     those two while available, pending, scheduled, retryable or running, so
//     one pair is never queued or scanned twice at once; a duplicate insert
//     returns the queued scan (TriggerScan's `already_queued`). A run that
//     ends INCOMPLETE returns an error and River retries it with exponential
//     backoff (base [Config.RetryBase], cap [Config.RetryMax], at most
//     [Config.MaxAttempts] attempts); QUARANTINED, NOT_REGISTERED and
//     EGRESS_REFUSED runs are cancelled (an operator must act; the periodic
//     refresh tries again).
//   - `discovery_refresh` is periodic (enqueued by River's elected leader
//     only): it lists the registry's servers and audience classes and queues
//     a scan of every pair whose last run started longer ago than the
//     server's `scan_interval` (or [Config.RefreshInterval]).
//   - `discovery_retention` is periodic: it deletes retained generations
//     that are neither active, fresh nor bound (I11) and compacts the change
//     log.
//
// Each process also watches the registry and queues scans when a server's
// transport, trust level, revision source or pin changes (not when
// discovery itself sets an empty pin) and when an audience class binds a
// server anew or changes its secret reference. Policy epoch bumps do not
// queue scans: they do not change what a server lists, every commit re-reads
// the epoch anyway, and the registry bumps epochs on every committed
// descriptor change, so rescanning on bumps would turn each commit into a
// rescan of every pointer of the tenant.
//
// # One scan
//
// A scan first reads the server, the audience class, its tenant and the
// tenant's policy epoch from the registry. Then, in one round trip on the
// process's lock session (one Postgres session holds the pair locks of all
// the process's scans, so the locks die with a killed process; see
// [pairLocks]), it takes a Postgres advisory lock on its pair, held for
// its whole duration, and only if it got it marks any unfinished run of the pair
// INCOMPLETE WORKER_LOST (its worker died: River rescued the job after
// [Config.RescueAfter]), starts its own run in DISCOVERING with the tenant
// and epoch it read (so the tenant's users see the running run; its
// protocol version, identity and trust digests are written with its end)
// and reads the pointer. It snoozes when another worker holds the lock,
// and is cancelled (INCOMPLETE WORKER_LOST, retried) if the session dies.
// Then:
//
//  1. the registry read decides (NOT_REGISTERED, REGISTRY_UNAVAILABLE), and
//     the pointer is read with the run's start (the CAS expectation);
//  2. resolves the class's secret reference for the server, `env:NAME` or
//     `file:/path` (CREDENTIAL_UNAVAILABLE); the credential lives only in
//     memory for the scan;
//  3. opens an MCP session (package crawl); on first use (empty pin) it pins
//     the observed identity in the registry (UpdateServer with the read
//     version), then records the trust configuration digest;
//  4. crawls, and validates a whole catalog (package candidate);
//  5. re-reads the policy epoch, the server and the class right before the
//     commit: a changed epoch is POLICY_EPOCH_CHANGED, a pin that no longer
//     matches the observed identity is IDENTITY_MISMATCH, any other change
//     of the trust configuration is TRUST_CONFIG_CHANGED (all INCOMPLETE,
//     retried);
//  6. commits by the pointer CAS (CAS_CONFLICT when it lost), or, when the
//     active generation has the same source revision, page root, identity
//     and trust configuration, refreshes it (UNCHANGED, no new generation).
//
// # Hearing changes after a scan
//
// After a commit (or refresh) of a server that declared `tools.listChanged`,
// the pair is recorded in `listen_pairs` and the scan's MCP session is handed
// to the pair's listener (see [listeners]): one listening connection per
// (server, audience class), the standalone SSE stream under 2025-06-18 and
// 2025-11-25, `subscriptions/listen` with toolsListChanged under 2026-07-28,
// over streamable HTTP or stdio. A listener belongs to the process holding
// the pair's Postgres advisory lock; each process keeps at most
// [Config.MaxListeners] and takes its fair share of the pairs on every sweep
// ([Config.ListenSweep]); a listener whose session dies (its end, a failed
// ping, the end of the listen stream) opens another with backoff and queues
// a LISTEN_RESUMED scan. When no listener takes the session it stays open
// for [Config.Linger] as before.
//
// Every `notifications/tools/list_changed` heard after a crawl decided, and
// every resumed listener, goes through the notification gate (see [gate]):
// notifications are coalesced per pair, the scan is queued no sooner than
// [Config.NotifyMinInterval] after the previous notification-triggered scan
// of the pair started, doubling while those scans find nothing new (up to
// [Config.NotifyMaxInterval]); the runs record what was held back
// (`suppressed_notifications`, `notification_delay_ms`) and the metric
// `toolcrib_discovery_suppressed_notifications_total` counts it by reason.
// If every process stops, the periodic refresh still catches changes, and
// the source revision catches A-B-A changes whichever scan sees them.
package scan
