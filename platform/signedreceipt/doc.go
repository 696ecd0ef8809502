// Package signedreceipt is the one definition of a signed admission
// receipt: the compact JWS (EdDSA) admission returns beside every ALLOW in
// CheckResponse.signed_receipt, over the receipt's decision fields, and
// that the lease service verifies locally in Issue instead of looking the
// receipt up.
//
// Admission signs with [Sign] and its own [keyring.Ring]; the lease
// service checks with [Parse] against admission's published keys
// (AdmissionService.GetSigningKeys). Parse checks the signature and the
// shape of the claims only; who may use the receipt, whether it is ALLOW
// and still valid, and its single use are the lease service's rules.
package signedreceipt
