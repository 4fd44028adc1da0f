// Package bluegreen keeps the pools of a holdfast factory working through an
// RDS or Aurora PostgreSQL blue/green switchover.
//
// During a switchover a plain pool sees dropped connections and refused
// connects and, because DNS lags, opens new connections to the old blue
// instance after it was renamed and made read-only: writes fail with
// SQLSTATE 25006, or land in the wrong place. With holdfast.WithBlueGreen,
// each pool gets a [Router] that watches the deployment's status in the
// metadata RDS publishes, keeps an inventory of the blue and green
// endpoints and their addresses, and, phase by phase, pins host names to
// addresses, holds traffic while the switch happens, refuses connections
// that would go astray, and issues IAM tokens and accepts certificates for
// the names the server it reaches answers to. It does for pgx what the AWS
// Advanced JDBC Wrapper's blue/green plugin does for JDBC, without the
// defects of its Go port. With no switchover under way, it costs the
// pool's hooks one atomic load each.
//
// Give the zero [Config] (every field has a default) to the factory:
//
//	f, err := holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{}))
//	// ...
//	defer f.Close() // stops the monitors
//	pool, err := f.NewPoolFromDSN(ctx, dsn)
//	// ...
//	st := f.BlueGreen(pool).Status()
//
// The database user needs to read the metadata: on RDS PostgreSQL, CREATE
// EXTENSION rds_tools and, for a user that is not the administrator, GRANT
// USAGE ON SCHEMA rds_tools and GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA
// rds_tools; on Aurora PostgreSQL nothing. On an engine without the
// metadata the Router finds it absent and routes nothing, at the cost of
// two idle monitor connections and an existence check per
// BaselineInterval.
//
// What the application sees: a connect, an Acquire or a statement held
// through IN_PROGRESS that reaches its bound fails with a [*SuspendError]
// (Transient: nothing was sent); a statement on a connection to the old
// blue instance fails with a [*DroppedError] (Transient: retry the whole
// transaction); a new connection by a green name once green took the blue
// names fails with a [*RejectError] (Fatal). [Rule] classifies the three,
// and the factory's classifier knows it.
//
// Where the details are: [Config] (the defaults and the polling), [Router]
// (the monitors, the topology, and the differences from the AWS Go
// wrapper), [Routing] (what happens to connections, phase by phase),
// [Name] (IAM tokens and certificates), [Summary] (the end of a
// switchover), [Status] (for readiness endpoints and dashboards; package
// readiness serves it). Which hosts the monitors trust: [Router].
//
// Package fakes/bluegreentest runs a blue and a green PostgreSQL on one
// machine, with the real metadata functions and a fake DNS, and plays whole
// switchovers; examples/switchover runs a workload through one, with a
// plain pgxpool next to a holdfast pool.
package bluegreen
