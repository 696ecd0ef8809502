// Package postgres opens pgx pools scoped to one service schema and runs
// embedded, numbered SQL migrations.
//
// Each service owns one schema (`registry`, `discovery`, ...). Its pool sets
// `search_path` to that schema, so service SQL is written unqualified, and
// one Postgres can hold every service.
//
// Migrations are files named `NNNN_description.sql` in an [fs.FS], grouped in
// named [Set]s so that a shared component (the watch change log) can bring its
// own tables into any schema. Applied migrations are recorded with a checksum
// in `<schema>.schema_migrations`; a recorded migration whose file changed is
// an error, never silently re-run. An advisory lock makes concurrent starters
// of the same service wait for each other.
package postgres
