// Package comparison compares a proven generation's tools with a reference
// — the static tool list an operator attached to the (server, audience
// class), or the generation the pointer named before — into the missing,
// extra and changed tools of a [discoveryv1.ToolDiff]. It holds pure rules
// and no I/O; the store calls it inside the commit's transaction.
package comparison
