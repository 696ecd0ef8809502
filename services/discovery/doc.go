// Package discovery will hold the discovery service (DESIGN §4, §6). Its API
// is defined in proto/toolcrib/discovery/v1; the service is not implemented
// yet, so `make run` does not start it.
package discovery
