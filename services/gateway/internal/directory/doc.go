// Package directory is what the gateway reads about a tool besides
// admission's decision, each behind a cache keyed so that it never goes
// stale: a generation's descriptors (discovery GetSnapshot, immutable), a
// tool's review and contract at a descriptor digest (registry
// GetToolReview, valid at the policy epoch it was read at: every change to
// it bumps that epoch), and the server's endpoint with the audience class's
// upstream credential (registry GetServer and GetAudienceClass, the secret
// reference resolved in memory, refreshed after a short lifetime). All
// calls present the gateway's service token.
package directory
