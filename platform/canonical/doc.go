// Package canonical turns JSON into its RFC 8785 (JSON Canonicalization
// Scheme, JCS) form and computes the `sha256:<hex>` digests every toolcrib
// service uses for descriptors, pages, snapshots and approvals.
//
// One implementation serves every service, so a digest computed by discovery
// is the digest admission and the registry compare against.
//
// Input must be I-JSON (RFC 7493): valid UTF-8, no duplicate member names, no
// lone surrogates, numbers representable as IEEE 754 doubles. Anything else
// is refused with an error wrapping [ErrInvalid]; nothing is silently
// repaired, because a repaired document would digest like a different one.
package canonical
