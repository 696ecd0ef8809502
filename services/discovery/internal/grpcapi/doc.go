// Package grpcapi implements toolcrib.discovery.v1.DiscoveryService over the
// store and the scanner. Requests are validated whole (InvalidArgument with
// one field violation per problem, I12); store and scanner errors are
// translated once, here, into gRPC codes with ErrorInfo reasons.
//
// Authorization: TriggerScan, Rollback and BindGeneration need a platform
// admin or a toolcrib service. Reads need a verified principal; a principal
// that is neither admin nor service sees only its own tenant's audience
// classes (others are NOT_FOUND, and Watch skips their changes).
package grpcapi
