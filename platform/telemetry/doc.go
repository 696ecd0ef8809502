// Package telemetry sets up OpenTelemetry tracing for a service process.
//
// Spans are exported over OTLP/gRPC when the standard
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// variable is set, and not at all otherwise; W3C trace context is always
// propagated so a caller's trace continues through toolcrib.
package telemetry
