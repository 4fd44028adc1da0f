package holdfast

import (
	"go.opentelemetry.io/otel"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// WithMeterProvider sets the OpenTelemetry meter provider of the factory's
// metrics. Default: the global provider (otel.GetMeterProvider()), so an
// application that installed its SDK gets holdfast's metrics for free.
//
// Pools are instrumented when, at Configure, the meter or the tracer
// provider is real; with no-op providers Configure installs no tracer and
// Acquire costs exactly what it costs in pgxpool. With the global providers
// before the application installs its SDK, connections made after the SDK
// is installed are instrumented (connect spans and metrics, statement
// durations, connection counts once the pool is attached by Start); the
// acquire and release metrics need the SDK at Configure. With the SDK,
// Acquire costs one small allocation and three histogram records per
// Acquire, statement and Release.
//
// The instruments and their attributes are listed in the package
// documentation.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp == nil {
			c.fail(&ConfigError{Field: "WithMeterProvider", Why: "the provider is nil"})
			return
		}
		c.meterProvider = mp
	}
}

// WithTracerProvider sets the OpenTelemetry tracer provider of the
// factory's spans. Default: the global provider (otel.GetTracerProvider()).
// See WithMeterProvider for when pools are instrumented.
//
//	holdfast.connect    one per connection a pool opens (kind client), from
//	                    BeforeConnect to the end of pgx's connect; one
//	                    holdfast.attempt event per password fetch and dial
//	                    attempt (holdfast.layer, holdfast.attempt,
//	                    holdfast.outcome, error.type, holdfast.error.class,
//	                    holdfast.retry.delay in seconds); status Error with
//	                    the classified verdict on failure
//	holdfast.acquire    Factory.Acquire's request-scope retry, from the
//	                    first failure, with one event per attempt
//	holdfast.startup    Factory.Start (and NewPool), with one event per attempt
//	holdfast.bluegreen.switchover  a switchover (WithBlueGreen), from
//	                    PREPARATION to its end, one event per phase; a held
//	                    connect, Acquire or statement gets
//	                    holdfast.bluegreen.suspended.duration (seconds) and
//	                    .reason on its span, and a link to this span
//
// Spans never carry error text, passwords or tokens.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp == nil {
			c.fail(&ConfigError{Field: "WithTracerProvider", Why: "the provider is nil"})
			return
		}
		c.tracerProvider = tp
	}
}

// WithOperationDuration(false) leaves db.client.operation.duration to
// another tracer, such as otelpgx, which records it too: holdfast then
// records its connection metrics and its own, but not the statement
// durations. Default: true.
func WithOperationDuration(record bool) Option {
	return func(c *config) { c.noOpDuration = !record }
}

// MeterProvider returns the meter provider of the factory's metrics: the
// one given to WithMeterProvider, else the global one at the time of the
// call. Package readiness records through it.
func (f *Factory) MeterProvider() metric.MeterProvider {
	if f == nil || f.meterProvider == nil {
		return otel.GetMeterProvider()
	}
	return f.meterProvider
}

// TracerProvider returns the tracer provider of the factory's spans, as
// MeterProvider does.
func (f *Factory) TracerProvider() trace.TracerProvider {
	if f == nil || f.tracerProvider == nil {
		return otel.GetTracerProvider()
	}
	return f.tracerProvider
}
