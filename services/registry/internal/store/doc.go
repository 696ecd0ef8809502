// Package store keeps the registry's records in PostgreSQL (schema
// `registry`) and is the only code that writes them.
//
// Every write is one transaction (a [unit]) that
//  1. locks the rows it changes (objects first: servers, tools, classes),
//  2. bumps the policy epoch of every affected tenant, one tenant row at a
//     time in tenant id order (`UPDATE … SET policy_epoch = policy_epoch +
//     1 RETURNING`: concurrent bumps queue on the row and each gets its own
//     epoch), and
//  3. appends its changes to the Watch log ([changelog.Log]) last, object
//     changes before the PolicyChange entries, so the log's counter lock
//     is always the last lock taken and a watcher that sees an epoch has
//     already seen what caused it.
//
// Because locks are always taken in that order, writers never deadlock on
// each other; a serialization failure or deadlock from Postgres is retried.
// A write that fails for any reason (bad input, stale version, permission)
// rolls back whole: nothing is half-written (I12).
//
// Lists read in one REPEATABLE READ transaction together with the log's
// head, so the revision they return is exactly the state they show.
//
// Review is per descriptor: a tool has one variant (tool_variants) per
// audience class that listed it, written only by that class's pointer
// moves ([Store.ApplyPointer]); each variant's approval digest and review
// state are derived from its descriptor digest, the tool's contract and
// the approvals in force, recomputed on every load and write. Reads and
// review actions take a [View]: everything for platform admins and
// services, otherwise only the variants of the caller's tenant's classes
// that cover the server; a tool with no such variant is a [NotFoundError],
// as if it did not exist. [Store.GetToolReview] answers admission's
// question with the tenant's epoch from the same snapshot.
//
// Errors are typed ([NotFoundError], [ExistsError], [StaleVersionError],
// [InvalidError], [PreconditionError], [PermissionError]); the gRPC layer
// translates them once.
package store
