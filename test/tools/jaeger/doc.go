// Package jaeger pins the tracing backend of the test bed: Jaeger v2 (its module's cmd/jaeger, an
// OpenTelemetry Collector distribution) with OTLP in and the query API out, built by
// test/tools/install.sh from this module so the bed's version is the one go.mod requires.
package jaeger
