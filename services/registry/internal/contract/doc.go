// Package contract is the owner-reviewed side of a tool (DESIGN §5): the
// contract's stored and hashed form [Doc], the checks a contract must pass
// against the tool's descriptor ([Validate]), and the approval digest that
// binds a descriptor digest and a contract together ([ApprovalDigest], I5).
//
// The digest is computed over a hand-written, explicitly tagged Go struct,
// never over protojson output, whose field order and spacing are not stable.
package contract
