// Package reason holds the ErrorInfo reasons the registry answers approval
// failures with, defined once so that clients (the console, the CLI) match
// them by import instead of by a copied string.
package reason

// ErrorInfo reasons of ApproveTool's FAILED_PRECONDITION answers.
const (
	// ApprovalDigestStale: the approval digest sent is no longer the
	// current approval digest of a variant the caller sees (the descriptor
	// or the contract changed under the reviewer).
	ApprovalDigestStale = "APPROVAL_DIGEST_STALE"
	// NoContract: no contract is published for the tool.
	NoContract = "NO_CONTRACT"
	// ContractInvalid: the contract no longer holds for the current
	// descriptor.
	ContractInvalid = "CONTRACT_INVALID"
)
