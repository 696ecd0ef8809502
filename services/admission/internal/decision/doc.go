// Package decision holds admission's decision rules (DESIGN §7, I3, I6, I8):
// from the facts a replica has gathered about one Check it returns exactly
// one reason and a bounded detail. It holds no state and does no I/O, so
// every rule is a pure function with a table test.
//
// The reasons are checked in [Order]; the first cause that holds is the
// answer:
//
//	INVALID_INPUT → FORBIDDEN (an audience class of another tenant named) →
//	STALE_POLICY → NOT_FOUND → SERVER_CLOSED → INCOMPLETE_DISCOVERY →
//	STALE_CATALOG → DISABLED → UNREVIEWED → STALE_SCHEMA →
//	FORBIDDEN / POLICY_REVOKED → UNVERSIONED_SOURCE → CONFIRMATION_REQUIRED →
//	ARGUMENTS_INVALID → ALLOW
//
// [Decide] makes the whole decision; [Prelim] makes it without the argument
// check, which is what the decision cache may hold (the argument check runs
// on every call, after the cache: [Final]).
package decision
