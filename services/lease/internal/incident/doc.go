// Package incident finds unauthorized events among the leases presented at
// Verify (a lease issued after a revocation of its subject's grant had
// committed) and hands each, once, to the reporter that delivers it to
// discovery's rollout guard (platform/incident).
package incident
