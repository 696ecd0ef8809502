// Package lease will hold the lease service (DESIGN §7a): short-lived,
// tool-scoped, holder-bound execution leases. Its API is defined in
// proto/toolcrib/lease/v1; the service itself is not implemented yet, so
// `make run` does not start it.
package lease
