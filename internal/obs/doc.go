// Package obs is holdfast's observability machinery: the OpenTelemetry
// instruments, the pgx/pgxpool tracers that feed them, the spans, and the
// structured log lines, all free of secrets.
//
// One [Telemetry] belongs to one holdfast.Factory, which builds it in
// holdfast.New from WithMeterProvider, WithTracerProvider and WithLogger.
// The root package calls it from its retry layers ([Telemetry.Retried],
// [Telemetry.Finished], [Telemetry.FirstTry]) and installs a [Pool] into each
// pgxpool.Config it configures. The readiness and bluegreen packages record
// through [Telemetry.Readiness] and [Telemetry.BlueGreen]; readiness finds
// the Telemetry of its factory with [Of].
//
// # Instruments
//
// Standard OpenTelemetry database client metrics (semantic conventions
// v1.43.0, built with go.opentelemetry.io/otel/semconv/v1.43.0/dbconv):
//
//	db.client.connection.count        {connection}  pool.name, state=idle|used   from pgxpool Stat()
//	db.client.connection.max          {connection}  pool.name                    from pgxpool Stat()
//	db.client.connection.create_time  s             pool.name [, error.type]     BeforeConnect → connect end
//	db.client.connection.wait_time    s             pool.name                    Acquire start → end
//	db.client.connection.use_time     s             pool.name                    Acquire end → Release
//	db.client.connection.timeouts     {timeout}     pool.name                    Acquire deadline exceeded
//	db.client.operation.duration      s             db.system.name, db.namespace, server.address, server.port
//	                                                [, error.type, db.response.status_code]
//
// holdfast's own ([holdfast.] prefix):
//
//	holdfast.connect.attempts           {attempt}     holdfast.stage, holdfast.outcome [, error.type, holdfast.error.class]
//	holdfast.retries                    {retry}       holdfast.layer, holdfast.stage, error.type
//	holdfast.recoveries                 {operation}   holdfast.layer, holdfast.stage, error.type
//	holdfast.retry.exhausted            {operation}   holdfast.layer, holdfast.stage, error.type, holdfast.retry.stop
//	holdfast.retry.budget.rejections    {retry}       holdfast.layer, holdfast.stage, error.type
//	holdfast.bluegreen.phase            {phase}       holdfast.bluegreen.id
//	holdfast.bluegreen.suspended.duration s           holdfast.bluegreen.id, holdfast.bluegreen.suspend.point, holdfast.outcome
//	holdfast.readiness.ready            1             (none)
//	holdfast.readiness.transitions      {transition}  holdfast.readiness.health, holdfast.readiness.reason
//	holdfast.readiness.drain.duration   s             holdfast.outcome
//
// error.type is always a classified reason (classify.Verdict.Reason, for
// example "token-fetch-503" or "sqlstate-53300"), or a SQLSTATE for
// db.client.operation.duration: never free text.
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
