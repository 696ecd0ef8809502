// Package args checks a tool call's arguments against the tool's pinned
// input schema (DESIGN §7, I6) with a full JSON Schema validator
// (github.com/santhosh-tekuri/jsonschema/v6).
//
//   - [Parse] refuses arguments that are not one JSON object within the
//     [Limits] (bytes, nesting depth, number of values) and returns the
//     canonical argument digest the receipt binds. Its refusals are the
//     request's INVALID_INPUT.
//   - [Validator] compiles each input schema once per input-schema digest
//     (a bounded LRU cache), with the dialect pinned (no `$schema` →
//     2020-12; only 2020-12 and draft-07 are accepted) and a loader that
//     refuses every URL, so no `$ref` is ever fetched. Its refusals are
//     ARGUMENTS_INVALID, with the JSON pointer of the first violation
//     (the smallest instance location, so the answer does not depend on map
//     order).
//
// The work of one validation is bounded by the argument limits: the schema
// side was bounded by discovery's size and depth limits when the
// generation was proven, and Go's regexp engine is linear-time.
package args
