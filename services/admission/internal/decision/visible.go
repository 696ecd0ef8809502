package decision

import admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"

// Listable reports whether a preliminary decision lets a tool be listed
// by ListVisibleTools: ALLOW, and the two denials a caller can still act
// on — CONFIRMATION_REQUIRED (a user confirms the call) and
// UNVERSIONED_SOURCE (the tool is a candidate; a confirmed call may run,
// I3). Every other reason means the principal may not call the tool now,
// so it is not shown.
func Listable(r Reason) bool {
	return r == Allow || r == ConfirmationRequired || r == UnversionedSource
}

// ListingRequest is the request a listed tool stands for: the tool at the
// active generation the listing read it from, with that generation's
// descriptor digest, read through class for run, asked autonomously (a
// host calls a listed tool without first asking anyone).
func ListingRequest(toolID string, generation int64, descriptorDigest, class, run string) Request {
	return Request{ToolID: toolID, Generation: generation, DescriptorDigest: descriptorDigest,
		Mode: admissionv1.Mode_MODE_AUTONOMOUS, RunID: run, AudienceClass: class}
}

// Visible is the one rule of who may see a tool: f's preliminary decision
// ([Prelim]) is [Listable]. ListVisibleTools builds f with
// [ListingRequest], so a listed tool is exactly one that Check, asked
// the same, answers ALLOW, CONFIRMATION_REQUIRED or UNVERSIONED_SOURCE.
func Visible(f Facts) bool { return Listable(Prelim(f).Reason) }
