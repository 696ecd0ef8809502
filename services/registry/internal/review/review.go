package review

import (
	"time"

	"github.com/toolcrib/toolcrib/services/registry/internal/contract"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Approval is one approval in force.
type Approval struct {
	// ID orders approvals: a larger id is newer.
	ID               int64
	ApprovalDigest   string
	DescriptorDigest string
	Contract         contract.Doc
	ContractVersion  int64
	ApprovedBy       string
	ApprovedAt       time.Time
	Comment          string
}

// Status is a tool's review position.
type Status struct {
	// ApprovalDigest is the current approval digest; empty while there is no
	// contract or no descriptor.
	ApprovalDigest string
	// State is the review state.
	State registryv1.ReviewState
}

// Evaluate returns the review status of a tool whose source descriptor has
// descriptorDigest, whose current contract is c (nil when none is
// published), given the approvals in force.
func Evaluate(descriptorDigest string, c *contract.Doc, approvals []Approval) (Status, error) {
	if c == nil || descriptorDigest == "" {
		return Status{State: registryv1.ReviewState_REVIEW_STATE_PENDING_CONTRACT}, nil
	}
	d, err := contract.ApprovalDigest(descriptorDigest, *c)
	if err != nil {
		return Status{}, err
	}
	st := Status{ApprovalDigest: d, State: registryv1.ReviewState_REVIEW_STATE_UNREVIEWED}
	if Find(approvals, d) != nil {
		st.State = registryv1.ReviewState_REVIEW_STATE_APPROVED
	}
	return st, nil
}

// Find returns the approval in force with the given digest, or nil.
func Find(approvals []Approval, digest string) *Approval {
	for i := range approvals {
		if approvals[i].ApprovalDigest == digest {
			return &approvals[i]
		}
	}
	return nil
}

// RollbackRefusal says why a rollback cannot be made.
type RollbackRefusal struct {
	// Reason is the ErrorInfo reason: NO_APPROVED_VERSION or
	// NOTHING_TO_ROLL_BACK.
	Reason string
	// Message is for the caller.
	Message string
}

func (r *RollbackRefusal) Error() string { return r.Reason + ": " + r.Message }

// RollbackPlan is what a rollback does.
type RollbackPlan struct {
	// Withdraw are the ids of the approvals to withdraw; empty for none.
	Withdraw []int64
	// Restore is the approval whose contract becomes current.
	Restore Approval
}

// PlanRollback plans RollbackTool (see RollbackToolRequest). approvals are
// the approvals in force, newest first; current is the status of each
// variant of the tool (one per audience class, review is per descriptor)
// and c the tool's current contract.
//   - When no variant is approved, the newest approved contract becomes
//     current again. If it already is current (the descriptor changed at
//     the source), there is nothing to roll back.
//   - When some are, the approvals of the current contract for those
//     variants' descriptors are withdrawn and the newest approval left
//     becomes current.
//
// It returns a [*RollbackRefusal] when no approved version is left to go
// back to.
func PlanRollback(current []Status, c *contract.Doc, approvals []Approval) (RollbackPlan, error) {
	approvedNow := map[string]bool{}
	for _, st := range current {
		if st.State == registryv1.ReviewState_REVIEW_STATE_APPROVED {
			approvedNow[st.ApprovalDigest] = true
		}
	}
	if len(approvedNow) == 0 {
		if len(approvals) == 0 {
			return RollbackPlan{}, &RollbackRefusal{Reason: "NO_APPROVED_VERSION",
				Message: "the tool has no approved version to roll back to"}
		}
		newest := approvals[0]
		if c != nil && sameContract(*c, newest.Contract) {
			return RollbackPlan{}, &RollbackRefusal{Reason: "NOTHING_TO_ROLL_BACK",
				Message: "the current contract already is the newest approved one; the descriptor changed at the source, " +
					"which a rollback cannot undo: review and approve the current digest, or disable the tool"}
		}
		return RollbackPlan{Restore: newest}, nil
	}
	var (
		rest     []Approval
		withdraw []int64
	)
	for _, a := range approvals {
		if approvedNow[a.ApprovalDigest] {
			withdraw = append(withdraw, a.ID)
			continue
		}
		rest = append(rest, a)
	}
	if len(rest) == 0 {
		return RollbackPlan{}, &RollbackRefusal{Reason: "NO_APPROVED_VERSION",
			Message: "the current version is the only approved one; there is no earlier approved version to roll back to"}
	}
	return RollbackPlan{Withdraw: withdraw, Restore: rest[0]}, nil
}

func sameContract(a, b contract.Doc) bool {
	da, errA := contract.ApprovalDigest("", a)
	db, errB := contract.ApprovalDigest("", b)
	return errA == nil && errB == nil && da == db
}
