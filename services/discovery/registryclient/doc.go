// Package registry is discovery's view of the registry service: a small
// interface over the registry's gRPC API ([Registry]) and its production
// implementation ([Client]), which presents discovery's service token.
//
// Discovery never reads the registry's tables. It reads servers, audience
// classes and a tenant's policy epoch, watches registry changes to schedule
// scans, and writes exactly one thing: the identity pin of a server whose
// pin is empty, after its first scan (trust on first use). The registry
// allows a service principal that one update.
package registryclient
