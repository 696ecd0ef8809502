// Package condition is the one definition of a grant's condition (issue
// 25, docs/concepts/conditions.md): a CEL expression over `principal`,
// `tool`, `args` and `request` that must be true for the grant to count in
// a Check. The registry compiles it when it is written ([Compile]: parse,
// type-check, cost estimate) and refuses it with the position of the
// error; admission and `toolcrib policy test` compile the stored text once
// and evaluate it ([Expr.Eval]) on every call, under a runtime cost limit,
// failing closed on any error.
package condition
