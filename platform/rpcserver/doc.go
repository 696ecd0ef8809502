// Package rpcserver starts a toolcrib service's gRPC server the same way for
// every service: the standard health service (NOT_SERVING until the
// service's dependencies answer, and again whenever they stop answering),
// server reflection, and interceptors for structured slog logging,
// Prometheus metrics, OpenTelemetry tracing, panic recovery, authentication
// and error translation.
//
// On shutdown it sets every health status to NOT_SERVING, tells streaming
// handlers to finish through [Server.Draining], lets in-flight calls drain
// with GracefulStop for the configured deadline, then forces Stop.
package rpcserver
