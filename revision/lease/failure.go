package lease

import "fmt"

// Failure is why a lease was not accepted. Its values and names are those
// of toolcrib.lease.v1.VerifyFailure (without the VERIFY_FAILURE_ prefix),
// so the lease service converts one into the other by number; a test in the
// service keeps the two in step.
type Failure int32

// The failures, numbered as in lease.proto.
const (
	// Accepted is no failure.
	Accepted Failure = 0
	// BadSignature: the token is malformed, too large, not EdDSA, or its
	// signature does not verify with the key its `kid` names.
	BadSignature Failure = 1
	// Expired: `exp` (plus the clock-skew allowance) has passed.
	Expired Failure = 2
	// WrongAudience: the lease is for another executor.
	WrongAudience Failure = 3
	// BadProof: the holder proof is missing, malformed, too large, not
	// EdDSA, carries no Ed25519 public `jwk`, or its signature does not
	// verify with that key.
	BadProof Failure = 4
	// ArgumentsMismatch: the executor is about to run other arguments than
	// the lease was issued for.
	ArgumentsMismatch Failure = 5
	// AlreadyUsed: the lease was consumed before (single use).
	AlreadyUsed Failure = 6
	// Revoked: the lease, its tool, server or tenant was revoked.
	Revoked Failure = 7
	// PolicyChanged: the tenant's policy epoch moved past the lease's.
	PolicyChanged Failure = 8
	// StaleCatalog: the generation is no longer active or compatible.
	StaleCatalog Failure = 9
	// Frozen: issuance for the server is frozen.
	Frozen Failure = 10
	// UnknownKey: the token's `kid` is not in the key set.
	UnknownKey Failure = 11
	// ProofOtherHolder: the proof is signed by a key other than `cnf.jkt`.
	ProofOtherHolder Failure = 12
	// ProofStale: the proof's `iat` is outside the accepted window.
	ProofStale Failure = 13
	// ProofOtherLease: the proof names another lease id.
	ProofOtherLease Failure = 14
	// ProofWrongAudience: the proof names another executor audience.
	ProofWrongAudience Failure = 15
	// ProofOtherArguments: the proof names another argument digest.
	ProofOtherArguments Failure = 16
	// OtherTool: the lease is for another tool than the one to run.
	OtherTool Failure = 17
)

var failureNames = map[Failure]string{
	Accepted:            "UNSPECIFIED",
	BadSignature:        "BAD_SIGNATURE",
	Expired:             "EXPIRED",
	WrongAudience:       "WRONG_AUDIENCE",
	BadProof:            "BAD_PROOF",
	ArgumentsMismatch:   "ARGUMENTS_MISMATCH",
	AlreadyUsed:         "ALREADY_USED",
	Revoked:             "REVOKED",
	PolicyChanged:       "POLICY_CHANGED",
	StaleCatalog:        "STALE_CATALOG",
	Frozen:              "FROZEN",
	UnknownKey:          "UNKNOWN_KEY",
	ProofOtherHolder:    "PROOF_OTHER_HOLDER",
	ProofStale:          "PROOF_STALE",
	ProofOtherLease:     "PROOF_OTHER_LEASE",
	ProofWrongAudience:  "PROOF_WRONG_AUDIENCE",
	ProofOtherArguments: "PROOF_OTHER_ARGUMENTS",
	OtherTool:           "OTHER_TOOL",
}

// Failures lists every failure but [Accepted], in number order.
func Failures() []Failure {
	out := make([]Failure, 0, len(failureNames)-1)
	for f := BadSignature; int(f) < len(failureNames); f++ {
		out = append(out, f)
	}
	return out
}

// String returns the failure's name as in lease.proto without the
// VERIFY_FAILURE_ prefix, e.g. `ALREADY_USED`.
func (f Failure) String() string {
	if n, ok := failureNames[f]; ok {
		return n
	}
	return fmt.Sprintf("Failure(%d)", int32(f))
}

// Refusal is a lease that was not accepted: the one failure and a detail
// for the caller. The detail never contains the token, the proof or any
// other caller input beyond fixed-size digests and ids already checked.
type Refusal struct {
	// Failure is the reason.
	Failure Failure
	// Detail is human-readable.
	Detail string
}

func (r *Refusal) Error() string { return r.Failure.String() + ": " + r.Detail }

func refuse(f Failure, format string, args ...any) *Refusal {
	return &Refusal{Failure: f, Detail: fmt.Sprintf(format, args...)}
}
