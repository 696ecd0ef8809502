// Package issuance holds the rules for issuing a lease from an admission
// decision, as a pure function (no I/O, clock passed in): whose decision,
// which decision, how old, for which arguments, and how long the lease may
// live.
package issuance
