// Package registry will hold the registry service (DESIGN §2, §5). Its API
// is defined in proto/toolcrib/registry/v1; the service is not implemented
// yet, so `make run` does not start it.
package registry
