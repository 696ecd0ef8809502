// Package store keeps discovery's state in Postgres (schema `discovery`):
// runs and their pages, immutable snapshots and their tools, the lifecycle
// of generations, the active pointers, catalog receipts and generation
// bindings.
//
// The one acceptance point (I1) is [Store.Commit]: in ONE transaction it
// compare-and-swaps the pointer of (server, audience class) from the
// generation and change-log revision observed at scan start to a new
// generation (the pointer's last generation + 1, so numbers never repeat,
// also after a rollback), inserts the immutable snapshot with every tool's
// raw JSON, the generation's lifecycle row, retires the previous
// generation, records the run's end state and pages, appends the move to
// the change log (Watch) and writes the catalog receipt. The CAS and the
// writes are one statement, each write conditional on the CAS (the
// generation is known before it: the CAS compares the last generation the
// scan saw, so the snapshot's digest is made first); a snapshot of more
// than 256 tools or a run of more than 256 pages writes the rest by COPY
// after it. A lost CAS returns [ErrCASConflict] and writes nothing.
// [Store.Refresh] is the same CAS for a rescan that proved the active
// catalog again: only freshness moves.
//
// The commit also stores the shadow comparison of the new generation with
// the pair's static tool list and with the previous generation (package
// comparison), read by the commit's statement and written in the same
// transaction, so a committed generation never lacks its comparison; a
// refresh stores one when the static list changed since the generation
// was last compared ([Store.Refresh]).
//
// Snapshots and their tools are immutable in the database as well: triggers
// refuse every UPDATE and TRUNCATE, and every DELETE except by the retention
// sweep ([Store.Retain]), which never deletes the generation a pointer names.
//
// Errors: [ErrNotFound] (as a [NotFoundError] naming what) when a named run, pointer or generation does not
// exist; [ErrCASConflict] when the pointer is not where the caller expected;
// [ErrNotFresh] when a rollback target has expired. Everything else is an
// internal error.
package store
