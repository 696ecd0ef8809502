// Package candidate turns one crawl into the candidate a scan offers for
// commit: the crawl's proof (package crawl) followed, for a whole catalog,
// by validation (package validate). [Observe] is the whole decision short of
// the pointer CAS, as the discovery workers make it; the fault suite calls it
// directly with any go-sdk transport.
//
// It also defines the snapshot digest ([SnapshotDigest]), so anyone holding
// a snapshot can recompute it.
package candidate
