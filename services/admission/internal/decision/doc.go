// Package decision holds admission's decision rules (DESIGN §7, I3, I6, I8):
// from the facts a replica has gathered about one Check it returns exactly
// one reason and a bounded detail. It holds no state and does no I/O, so
// every rule is a pure function with a table test.
//
// The reasons are checked in [Order]; the first cause that holds is the
// answer:
//
//	INVALID_INPUT → FORBIDDEN (an audience class of another tenant named) →
//	STALE_POLICY → NOT_FOUND → NOT_FOUND (rollout stage SHADOW) →
//	SERVER_CLOSED → INCOMPLETE_DISCOVERY → STALE_CATALOG → DISABLED →
//	UNREVIEWED → STALE_SCHEMA → FORBIDDEN / POLICY_REVOKED →
//	FORBIDDEN (rollout stage CANARY: no run id, a run outside the share,
//	an effect class outside the canary's) → UNVERSIONED_SOURCE →
//	ARGUMENTS_INVALID → CONDITION_UNMET → CONFIRMATION_REQUIRED → ALLOW
//
// The rollout stage ([Rollout]) comes from the policy at the epoch decided
// at, like the grants; a run's place in a canary is [CanaryBucket].
// [Decide] makes the whole decision; [Prelim] makes it without the argument
// check and the grants' conditions, which is what the decision cache may
// hold: Prelim counts every grant, conditional or not, so its inputs are
// the cache key's (the principal's scope-set digest covers the union of
// its grants). The argument check and the conditions ([Conditions]) run
// on every call, after the cache: [Final]. A preliminary
// CONFIRMATION_REQUIRED goes through them too, so a person is never asked
// to confirm a call that would then be refused.
package decision
