// Package grpcapi implements toolcrib.admission.v1.AdmissionService on top
// of the replica's heads and material, the decision rules, the decision
// cache, the argument validator and the receipt writer. The principal comes
// only from the verified token (platform/principal). Denials are OK
// responses with a reason; errors are kept for a missing credential and for
// a replica that cannot read what a decision needs (UNAVAILABLE: never an
// allow), translated once, in [translate].
package grpcapi
