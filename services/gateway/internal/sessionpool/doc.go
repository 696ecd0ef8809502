// Package sessionpool keeps the gateway's MCP client sessions to upstream
// servers, one per (endpoint, credential): the credential is the audience
// class's (never the caller's token), sent as a bearer token; dials go
// through the egress policy and never through an ambient proxy.
package sessionpool
