// Package oracle computes, from a fixture's mutation log alone, the outcome
// a correct toolcrib crawl of one scan must reach (DESIGN §3 I2–I3, §4,
// §6): the end state, the one reason, and the exact tool set to activate.
// It shares no code with the crawler (services/discovery); the randomized
// fault suite compares the two, and any disagreement is a bug in one of
// them. Descriptor digests come from platform/canonical, the platform's one
// implementation of RFC 8785.
//
// # The reference crawl
//
// [Expect] replays the log as a crawler that does this:
//
//  1. It asks for page 1 with no cursor, then follows `nextCursor` page by
//     page. A page has a next page when it carries `nextCursor`; before
//     2026-07-28 an empty-string `nextCursor` is the end of the list, from
//     2026-07-28 on it is a cursor like any other.
//  2. After the last page it asks for page 1 again, with no cursor: the
//     closing re-check. (For a server registered with revision source
//     NONE the re-check may be skipped; if it is in the log it counts.)
//  3. It stops at the first fault, in the order the server sent things:
//     a `notifications/tools/list_changed` sent before a response is
//     handled before that response. One interleaving has no such order for
//     the client: over streamable HTTP ([Config.ConcurrentStreams]) a
//     notification written on a request's stream followed by a dropped
//     connection, which the client may see first on its standalone SSE
//     stream. The outcome is LIST_CHANGED with TRANSPORT_ERROR also allowed
//     ([Outcome.AlsoAllowed]); INCOMPLETE, nothing activated, either way.
//
// Each response is checked in this order; the first rule that fires ends
// the scan with its reason:
//
//   - any `list_changed` the server sent to the crawler's session (or to a
//     session without an id) after the scan's first request arrived and
//     before this response: INCOMPLETE, LIST_CHANGED. A notification sent
//     after the re-check's response is late and changes nothing;
//   - revision source SERVER_PROVIDED only: JSON-RPC error -32602 (invalid
//     params) to a request that carried a cursor: INCOMPLETE,
//     REVISION_MISMATCH (DESIGN §6: a revision-bound cursor of an expired
//     revision is refused that way, so the revision moved between pages);
//   - any other JSON-RPC error or a dropped connection: INCOMPLETE,
//     TRANSPORT_ERROR;
//   - revision source SERVER_PROVIDED only: no revision on the page:
//     REVISION_MISSING; a revision other than page 1's: REVISION_MISMATCH.
//     The re-check is checked the same way;
//   - the re-check only: its tools must be the walk's first tools (the
//     same RFC 8785 JSON; byte for byte for a tool that is not I-JSON),
//     and all of them when it has no next page (none left over when it
//     has one): otherwise REVISION_MISMATCH, for either revision source.
//     Pages may be cut differently on the second reading; their content
//     may not differ. Then the scan is whole;
//   - walk pages only, then: `nextCursor` equal to the cursor the request
//     carried: REPEATED_CURSOR; equal to any cursor sent earlier in the
//     scan (including the first request's empty cursor, from 2026-07-28
//     on): CURSOR_CYCLE;
//   - caps, counted over walk pages (never the re-check): more tools than
//     MaxTools so far: TOOL_CAP; more result bytes ([fixture.Event].Bytes,
//     the size of the JSON-RPC `result` value) than MaxBytes so far:
//     BYTE_CAP; a next page after MaxPages pages: PAGE_CAP.
//
// A whole scan is SNAPSHOT_PROVEN for revision source SERVER_PROVIDED (its
// generation then becomes ELIGIBLE when the pointer CAS commits it) and
// UNVERSIONED_OBSERVATION for NONE, whatever revisions the server sent:
// never eligible for an autonomous call with side effects (I3).
//
// # Validation
//
// A whole catalog, proven or unversioned, is then validated tool by tool
// in page order; the first tool that fails a check makes it QUARANTINED
// with the reason of the first check (in this order) it fails.
// Completeness faults always win over content faults.
//
//  1. MALFORMED_TOOL: a tool that is not a JSON object, has no string
//     `name`, or is not I-JSON (platform/canonical refuses it);
//  2. INVALID_TOOL_NAME: a name outside `[A-Za-z0-9_.-]{1,128}`;
//  3. DUPLICATE_TOOL_NAME: an earlier tool has the same name;
//  4. SCHEMA_TOO_LARGE: the tool as served is longer than MaxToolBytes;
//  5. INVALID_SCHEMA: no `inputSchema`;
//  6. for `inputSchema`, then `outputSchema` when present:
//     a. SCHEMA_TOO_LARGE: its canonical JSON is longer than
//     MaxSchemaBytes;
//     b. SCHEMA_TOO_DEEP: nested deeper than MaxSchemaDepth, where a
//     scalar has depth 0 and an object or array one more than its deepest
//     member (so `{"type":"object"}` has depth 1);
//     c. INVALID_SCHEMA: not a JSON object;
//     d. UNKNOWN_DIALECT: a `$schema`, at the root or in any subschema,
//     that is not a string naming 2020-12 or draft-07. A name is compared
//     after removing one trailing `#` and reading `http://` as `https://`,
//     against `https://json-schema.org/draft/2020-12/schema` and
//     `https://json-schema.org/draft-07/schema`. No `$schema` means
//     2020-12;
//     e. NETWORK_REF: a `$ref`, `$dynamicRef` or `$recursiveRef` of any
//     subschema with a string value not starting with `#`;
//     f. INVALID_SCHEMA: its `type` is not "object";
//     g. UNRESOLVED_REF: a `#...` reference that does not resolve in its
//     own schema: `#` is the root, `#/a/b` a JSON pointer (percent-decoded,
//     then `~1` and `~0` unescaped), `#name` a subschema with `$anchor` or
//     `$dynamicAnchor` equal to name;
//  7. INVALID_ICON: an `icons` member that is not an array of objects
//     with a string `src` whose scheme is `https` or `data`.
//
// A subschema is any object in a schema except inside the values of the
// data keywords `enum`, `const`, `default`, `examples` and `example`
// (instances, in which nothing is a keyword); the members of `properties`,
// `patternProperties`, `$defs`, `definitions`, `dependentSchemas` and
// `dependencies` are subschemas whatever their names.
//
// Findings that do not refuse a catalog (e.g. a description that addresses
// the model) are not modelled: the oracle has no opinion on flags.
//
// # What the oracle does not see
//
// The pointer CAS (policy epoch, trust configuration, identity pin,
// UNCHANGED rescans) happens after the scan and is judged by the fault
// suite's own assertions; [Outcome.State] is what the scan proves.
//
// When the log does not decide the outcome — the scan never finished, or
// the crawler sent a request the reference crawl would not have sent —
// [Expect] returns an error wrapping [ErrUnfinished] or [ErrDeviation]
// instead of guessing: for the fault suite, that is a disagreement too.
package oracle
