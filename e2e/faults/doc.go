// Package faults is toolcrib's discovery fault suite: the acceptance gates
// that let anyone trust a catalog generation (seed 000, "attacking
// integrity with drift and reordering"; DESIGN §3 I1–I4, I10–I12, §9).
// It has no code of its own; everything is in its tests.
//
// # Named faults
//
// Each runs the real discovery service (discovery.Run: its gRPC API and
// River workers on a fresh Postgres database) against fixture MCP servers
// (package e2e/fixture) over a real transport, and asserts the exact end
// state and reason of every run, which generations exist and which run
// committed each, and — wherever a scan's outcome is the crawl's own — that
// the independent oracle (package e2e/oracle) judges the fixture's log the
// same way:
//
//   - TestListChangedAfterPage2AbortsTheScan: INCOMPLETE LIST_CHANGED,
//     then a retry proves the catalog;
//   - TestABACatalogChangeBetweenScansIsANewGeneration: same tools, moved
//     revision: a new generation, not UNCHANGED;
//   - TestLateListChangedSchedulesARescan: a notification after the commit
//     queues a LIST_CHANGED rescan;
//   - TestSourceRevisionChangingBetweenPages: INCOMPLETE REVISION_MISMATCH
//     on lenient and revision-bound servers;
//   - TestCursorFaultsAreIncomplete: repeated cursors, cycles, empty
//     cursors of 2026-07-28;
//   - TestContentFaultsQuarantineTheCatalog: unknown dialects, network
//     references (counted on a loopback server: never fetched), oversized
//     and deep schemas, invalid names, one name with two schemas;
//   - TestInstructionsInADescriptionAreFlaggedNeverFollowed;
//   - TestServerIdentityChangeIsQuarantined: a rotated TLS key
//     (QUARANTINED IDENTITY_MISMATCH, nothing activated);
//   - TestPolicyEpochBumpDuringScanRefusesTheCAS: with the real registry
//     (registry.Run), a revocation mid-scan: POLICY_EPOCH_CHANGED;
//   - TestDiscoveryKilledMidPaginationIsRetriedElsewhere: SIGKILL of a
//     child discovery process, WORKER_LOST, retried and proven by another;
//   - TestUnversionedSourceIsObservationOnly: over stdio,
//     UNVERSIONED_OBSERVATION, never ELIGIBLE;
//   - TestPrivateCatalogsStayWithTheirAudienceClass: two tenants' classes,
//     one server, private lists, different credentials.
//
// N concurrent commits to one pointer, checked for linearizability with
// porcupine, are tested where the CAS lives:
// services/discovery/internal/store (TestPointerCASIsLinearizable).
//
// # The randomized test
//
// TestRandomizedCrawlAgreesWithOracle plays rounds of package
// e2e/scenario (random pagination and notification interleavings, page
// sizes, catalog changes between and during pages, revisions present or
// absent, cursor, transport and content faults), each crawled and
// validated by discovery (candidate.Observe) over in-memory transports or,
// in one round of eight, streamable HTTP, and compares the end state, the
// reason and the activated tool set with the oracle. Environment:
// TOOLCRIB_FAULT_ROUNDS (default a CI share), TOOLCRIB_FAULT_SEED (replay
// one round, with a trace), TOOLCRIB_FAULT_SEED_BASE (repeat a run).
//
// # Counters
//
// The tests record what they counted with platform/faultreport; `make
// faults` runs the suite with 100,000 rounds, writing the records to
// TOOLCRIB_FAULTS_DIR, and prints the summary line with
// e2e/cmd/faultsummary:
//
//   - rounds, agree: randomized rounds played, and those in which crawler
//     and oracle agreed;
//   - unversioned_side_effect_eligible: a catalog of an unversioned source
//     (registered NONE, or sending no revision) that came out proven, i.e.
//     eligible for autonomous calls with side effects (every round, and
//     every unversioned generation of the named tests);
//   - partial_activated: a proven (ELIGIBLE) catalog that is not exactly one
//     whole catalog state of the server at the proven revision (every
//     round, and every activation of the named tests). Unversioned
//     observations may be torn (that is why they are observation only, I3)
//     and are not counted;
//   - cross_audience_shared: tools found in an audience class they were not
//     served to;
//   - unknown_dialect_accepted: a usable catalog with a `$schema` outside
//     the allow-list (every round, and the dialect cases);
//   - network_ref_fetched: requests the loopback schema server saw;
//   - cas_checks, cas_not_linearizable: porcupine checks of the pointer CAS
//     history, and those that failed.
package faults
