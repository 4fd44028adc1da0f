// Package obs is holdfast's observability machinery: the OpenTelemetry
// instruments, the pgx/pgxpool tracers that feed them, the spans, and the
// structured log lines, all free of secrets.
//
// One [Telemetry] belongs to one holdfast.Factory, which builds it in
// holdfast.New from WithMeterProvider, WithTracerProvider and WithLogger.
// The root package calls it from its retry layers ([Telemetry.Retried],
// [Telemetry.Finished], [Telemetry.FirstTry]) and installs a [Pool] into each
// pgxpool.Config it configures. The readiness and bluegreen packages record
// through [Telemetry.Readiness] and [Telemetry.BlueGreen]; readiness builds
// a Telemetry from its factory's providers (holdfast.Factory.MeterProvider
// and TracerProvider).
//
// # Instruments
//
// The instruments, their units and attributes are listed once, in the
// repository's docs/telemetry.md; the names are the Metric* constants
// here.
//
// # Stages and layers
//
// holdfast.stage is the service stage: [StageStartup] (the first
// connection, made by Factory.Start or NewPool), [StagePoolGrowth] (a new
// connection opened while the service runs) or [StageRequest] (the
// request-scope retry of Factory.Acquire). holdfast.layer is the retry layer
// the event happened in: [LayerConnect] (one dial), [LayerPassword] (one
// password or token fetch), [LayerAcquire] (Factory.Acquire) or
// [LayerStartup] (Factory.Start). Log lines carry both under the same
// names as metrics and spans.
//
// # Cost
//
// Nothing here runs on pgxpool's Acquire path unless the pool was configured
// while a real meter or tracer provider was installed ([Telemetry.Active]):
// with no-op providers the pool keeps its own tracer (or none) and the Acquire
// path is byte for byte pgxpool's. With an SDK, Acquire costs one small
// allocation (the context that carries the acquire start time) and three
// histogram records per Acquire + query + Release.
//
// # Secrets
//
// Metrics and spans never carry error text, only classified reasons,
// SQLSTATEs and the configured host, port, database and pool name. Log lines
// carry error text passed through [Redactor], which removes the passwords and
// tokens the factory has seen and any password in a connection string.
package obs
