// Package incident finds unauthorized events among the leases presented at
// Verify (a lease issued after a revocation of its subject's grant had
// committed) and reports each once to discovery's rollout guard
// (DiscoveryService.ReportIncident), off the Verify path.
package incident
