// Package apierror is how toolcrib services report failures: typed errors
// inside, translated once at the gRPC boundary into standard status codes
// with google.rpc error details (ErrorInfo, BadRequest). Internal error text
// never reaches a client; it is logged with the call instead.
//
// Decisions are not errors: a denied admission Check is an OK response with a
// reason. Use this package for requests that cannot be answered.
package apierror
