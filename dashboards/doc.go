// Package dashboards holds holdfast's Grafana dashboard, over the names
// Prometheus gives holdfast's OpenTelemetry metrics (through
// go.opentelemetry.io/otel/exporters/prometheus, or an OpenTelemetry
// Collector's Prometheus exporter, which name them the same way).
package dashboards
