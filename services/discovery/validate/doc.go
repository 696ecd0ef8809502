// Package validate checks the tools of a whole candidate catalog (DESIGN §4)
// and derives what a snapshot records about each tool: schema digests, the
// pinned schema dialect, the annotations as sent (recorded, never trusted),
// and flags.
//
// [Catalog] goes through the tools in page order and stops at the first
// refusal, which decides the run's reason. For each tool the checks run in
// this order (the first that fails is reported):
//
//  1. MALFORMED_TOOL: the object could not be canonicalized (RFC 8785), has
//     no string `name`, or a member of the wrong JSON type (`title`,
//     `description` not strings, `annotations` not an object, `icons` not an
//     array of objects);
//  2. INVALID_TOOL_NAME: the name is not `[A-Za-z0-9_.-]{1,128}`;
//  3. DUPLICATE_TOOL_NAME: an earlier tool has the same name;
//  4. SCHEMA_TOO_LARGE: the raw tool is over [Limits.MaxToolBytes];
//  5. the input schema (required), then the output schema (when present),
//     each checked by [Schema]:
//     SCHEMA_TOO_LARGE (canonical size over [Limits.MaxSchemaBytes]),
//     SCHEMA_TOO_DEEP (nesting over [Limits.MaxSchemaDepth]),
//     UNKNOWN_DIALECT (a `$schema`, at the root or in a subschema, outside
//     the allow-list: none means 2020-12; 2020-12 and draft-07 are allowed),
//     NETWORK_REF (a `$ref`, `$dynamicRef` or `$recursiveRef` that is not a
//     local fragment `#…`; it is never fetched), INVALID_SCHEMA (not a JSON
//     object with `"type": "object"`, or not a valid schema of its dialect),
//     UNRESOLVED_REF (a local reference that does not resolve);
//  6. INVALID_ICON: an icon `src` whose scheme is not https or data.
//
// Schema validity is decided by github.com/santhosh-tekuri/jsonschema/v6
// with a loader that refuses every URL (the metaschemas are built into the
// library), so compiling can never reach the network or the file system. To
// keep a 100,000-tool catalog fast, a schema that uses only plain keywords
// (no references, no `$id`/`$anchor`, see simple.go) with values of the
// types the metaschema requires is accepted without compiling; everything
// else is compiled, and verdicts are cached by schema digest. A test checks
// the fast path against the compiler.
//
// Findings that do not refuse the catalog become flags:
//
//   - DESCRIPTION_INSTRUCTIONS: text aimed at the model rather than
//     describing the tool, found by the heuristics in flags.go in the
//     description, title and the descriptions and titles inside the schemas
//     (e.g. "ignore previous instructions", `<IMPORTANT>` tags, "do not tell
//     the user", "before using any other tool", requests to read or send
//     credentials). Recorded, never executed or followed, never quarantines.
//   - ANNOTATION_CONFLICT: `readOnlyHint` and `destructiveHint` both true.
//
// Annotations are recorded as sent and never trusted (I4): the effect class
// of a tool comes from its owner-reviewed registry contract.
package validate
