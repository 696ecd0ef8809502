// Package policy is the result policy of a tool call (DESIGN §7b, seeds
// 003 and 004): pure rules, no I/O. A successful result's
// `structuredContent` is projected to the contract's allowed fields; a
// result missing a required-evidence field is refused, naming it; the
// projected value must validate against the tool's output schema. The
// caller decides what to do with a result over its size budget (the
// artifact store).
package policy
