// Package admissionoracle computes the one reason a correct admission
// replica must answer to a Check, from DESIGN §7 and the order documented
// on AdmissionService.Check alone. It shares no code with the admission
// service (it imports nothing of services/admission): its request rules,
// its grant arithmetic and its argument check are written here again, so
// the randomized decision test (e2e/faults, TestRandomizedDecisionsAgreeWithOracle)
// can compare the two and any disagreement is a bug in one of them.
//
// # The model
//
// [State] is what a replica may know: each tenant's current policy epoch
// and the policies it can still read (grants, audience classes and the
// servers they read, and the registry's view of each tool: enabled, and
// the contracts approved per descriptor digest), each pointer's head
// (generation, closed, unversioned, fresh_until), the generations it can
// read (tool id → descriptor digest and input schema), and whether its
// Watch streams are fresh.
//
// # The rules, in order (first that holds is the answer)
//
//  1. INVALID_INPUT: a malformed field (tool id `<server>.<name>`, server
//     `[a-z0-9][a-z0-9_-]{0,62}`, name `[A-Za-z0-9_.-]{1,128}`; generation
//     from 1; digest `sha256:` and 64 lowercase hex; epoch not negative;
//     mode AUTONOMOUS or USER_CONFIRMED; run id `[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}`
//     when set; class `<tenant>.<name>` when set) or arguments that are not
//     an I-JSON (RFC 7493) object within the replica's caps ([Limits]):
//     valid UTF-8, no duplicate member names, numbers a double holds (what
//     RFC 8785, the form the argument digest is taken over, needs).
//     A shown digest set with a mode other than USER_CONFIRMED, or not
//     `sha256:` and 64 lowercase hex, is malformed too.
//  2. FORBIDDEN: a named class whose tenant part is not the principal's;
//     then FORBIDDEN for a USER_CONFIRMED request whose confirmer header
//     is not a token of the confirmer group of the platform tenant (none,
//     a tenant user's even in a group of that name, a service's, an
//     invalid one): only a confirmer asserts a confirmation.
//  3. STALE_POLICY: the replica's streams are not fresh.
//  4. NOT_FOUND: the tenant is unknown, no class of the principal's current
//     grants (the named one, if named) reads the tool's server, or the tool
//     is in neither the active generation nor the plan's. When several of
//     the principal's classes read the server and none is named, the first
//     in name order is the one read (DESIGN leaves the choice open; this is
//     the oracle's stated assumption).
//  5. INCOMPLETE_DISCOVERY: no generation was ever proven for (server,
//     class) (no pointer; nothing can be said of the tool's existence).
//  6. SERVER_CLOSED, 7. STALE_CATALOG (past fresh_until; gone from the
//     active generation; plan generation newer than the active one; older
//     and not listing the tool), 8. DISABLED (unknown to the registry or
//     disabled), 9. UNREVIEWED (active digest not approved), 10.
//     STALE_SCHEMA (the plan's digest is not the active one), 11.
//     FORBIDDEN / POLICY_REVOKED (the current grants lack the approved
//     contract's scope; POLICY_REVOKED when the grants at the plan's older,
//     still readable epoch held it through the same class), 12.
//     UNVERSIONED_SOURCE (autonomous, side effects, unversioned pointer),
//  13. ARGUMENTS_INVALID (the arguments fail the pinned input schema),
//  14. CONDITION_UNMET (issue 25: a grant counts when it has no condition
//     or its condition holds for this call ([Cond]); the counted grants
//     lack the contract's scope or the class read through), 15.
//     CONFIRMATION_REQUIRED (autonomous and WRITE/DESTRUCTIVE/UNSPECIFIED
//     by default, always with CONFIRMATION_ALWAYS, never with
//     CONFIRMATION_AUTONOMOUS_ALLOWED; and whatever the contract says when
//     the call has side effects and the server's trust level is neither
//     FIRST_PARTY nor PARTNER), 16. ALLOW.
//
// The order of SERVER_CLOSED before INCOMPLETE_DISCOVERY in the list of
// DESIGN §7 cannot both apply: a closed server has a pointer.
package admissionoracle
