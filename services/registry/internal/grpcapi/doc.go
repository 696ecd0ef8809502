// Package grpcapi implements toolcrib.registry.v1.RegistryService on top of
// the store: it authorizes the verified principal, validates each request
// whole (one field violation per problem, I12), calls the store, and
// translates the store's typed errors into gRPC statuses once ([translate]).
//
// Watch streams the change log ([changelog.Log]) from a revision, with
// heartbeats, and ends cleanly when the server drains.
package grpcapi
