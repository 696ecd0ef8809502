// Package store is the lease service's PostgreSQL store (schema `lease`):
// execution receipts, revocations and issuance freezes.
package store
