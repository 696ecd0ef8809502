// Package schema is the one way toolcrib compiles a JSON Schema: from its
// own document only, never fetching. Discovery (refusing a catalog),
// admission (validating arguments under a pinned input schema) and the
// gateway (validating structured results under an output schema) all
// compile with [Compiler].
//
// The rule:
//   - the dialect allow-list: a root `$schema` must name 2020-12 or
//     draft-07 ([Dialect]); none means 2020-12; anything else is refused
//     with [ErrUnknownDialect] (discovery's UNKNOWN_DIALECT);
//   - the refusing loader: every reference the document does not resolve
//     itself (a network URL, a file, another document, an unknown
//     metaschema in a subschema) asks the loader, which refuses without any
//     I/O; the compile then fails with [ErrLoadRefused] (discovery's
//     NETWORK_REF). Local references (`#/$defs/x`, anchors, embedded
//     resources) resolve; a relative reference resolves against the
//     document's own URN ([ResourceURL]), so it names the document itself,
//     never another one.
package schema
