// Package review decides where a tool stands in owner review, from the
// facts the registry stores: the descriptor digest at the source, the
// current contract, and the approvals still in force. It holds no state and
// touches no database, so every rule is a pure function with a table test.
//
// The rules (DESIGN §5, I5):
//   - no contract published: PENDING_CONTRACT;
//   - the current approval digest (descriptor digest + contract) is the
//     digest of an approval in force: APPROVED;
//   - otherwise UNREVIEWED — so a new descriptor at the source, or a newly
//     published contract, is unreviewed until someone approves exactly it.
//
// The rules apply per variant: each audience class may see its own
// descriptor of a tool (MCP lets tools/list vary by credential), so each
// variant has its own approval digest and state under the tool's one
// contract.
//
// Rollback ([PlanRollback]) only ever moves the contract back to one that
// was approved, withdrawing the approvals of every variant approved under
// the current one; it cannot change the descriptor at the source.
package review
