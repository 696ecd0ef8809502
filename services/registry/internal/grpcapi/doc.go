// Package grpcapi implements toolcrib.registry.v1.RegistryService on top of
// the store: it authorizes the verified principal, validates each request
// whole (one field violation per problem, I12), calls the store, and
// translates the store's typed errors into gRPC statuses once ([translate]).
//
// Watch is the shared Watch server ([changelog.Server]) over the change
// log: filtered to the caller's tenant for tenant principals, ended with
// UNAVAILABLE DRAINING when the server drains.
package grpcapi
