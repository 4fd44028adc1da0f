package bluegreen

import (
	"log/slog"
	"time"
)

// Engine names the metadata the deployment's status is read from. Its
// values are their own JSON and log form.
type Engine string

const (
	// EngineAuto uses Aurora PostgreSQL's function when it exists, else
	// RDS PostgreSQL's; in [Status], no metadata was found yet. The empty
	// Engine of the zero Config means EngineAuto.
	EngineAuto Engine = "auto"
	// EngineAurora reads pg_catalog.get_blue_green_fast_switchover_metadata(text).
	EngineAurora Engine = "aurora"
	// EngineRDS reads rds_tools.show_topology(text) (CREATE EXTENSION rds_tools).
	EngineRDS Engine = "rds"
)

// Config configures blue/green routing for every pool of a holdfast
// factory (holdfast.WithBlueGreen). It is plain data: the factory copies
// it. The zero value works: every zero field takes its default, those of
// the AWS Advanced JDBC Wrapper's blue/green plugin, and monitor timeouts,
// which it does not have:
//
//	field                  default  meaning
//	ID                     "1"      names the deployment in logs ("[bgdId: '1']")
//	ConnectTimeout         30s      longest wait of a held connect, Acquire or statement (the caller's context bounds it too)
//	SwitchoverTimeout      180s     after PREPARATION, give up on the switchover and route normally, whatever the metadata says
//	BaselineInterval       60s      polling while no deployment exists (NOT_CREATED)
//	IncreasedInterval      1s       polling while a deployment exists (CREATED)
//	HighInterval           100ms    polling from PREPARATION until the switchover has settled, and while a monitor reconnects
//	MonitorConnectTimeout  10s      each monitor connection attempt
//	MonitorQueryTimeout    10s      each monitor query and DNS lookup
//	Engine                 auto     Aurora's function if it exists, else RDS's
//	Logger                          the factory's (holdfast.WithLogger), else none
//
// A negative duration or an unknown Engine makes holdfast.New return a
// *holdfast.ConfigError (Field "WithBlueGreen") whose Err is another, of
// Pkg "bluegreen", naming the field.
type Config struct {
	// ID names the deployment in logs and in the switchover summary
	// ("[bgdId: 'ID']"). Default "1".
	ID string

	// ConnectTimeout bounds every wait: a new connection suspended in
	// IN_PROGRESS or waiting for its green counterpart, an Acquire or a
	// query suspended in IN_PROGRESS. The caller's context bounds it too
	// (new connections are built by pgxpool without the caller's
	// cancellation, so there only ConnectTimeout applies). A wait that
	// reaches the bound fails with a *SuspendError. Default 30 s.
	ConnectTimeout time.Duration

	// SwitchoverTimeout is how long after PREPARATION is first seen the
	// routing gives up on the switchover and returns to plain host names,
	// whatever the metadata says. Keep it well above a real switchover
	// (1.5 to 2 times), or a rollback after it goes unnoticed. Default 180 s.
	SwitchoverTimeout time.Duration

	// BaselineInterval is the polling interval while no deployment exists
	// (NOT_CREATED), IncreasedInterval while one exists (CREATED), and
	// HighInterval from PREPARATION until the switchover has settled, and
	// while a monitor has no connection (a monitor whose connection breaks
	// reconnects with a backoff that starts at HighInterval). A monitor
	// waiting on a connect or a query keeps resolving DNS at the same
	// interval. Defaults 60 s, 1 s, 100 ms.
	BaselineInterval  time.Duration
	IncreasedInterval time.Duration
	HighInterval      time.Duration

	// MonitorConnectTimeout bounds each monitor connection attempt, and
	// MonitorQueryTimeout each monitor query and DNS lookup. Defaults 10 s.
	MonitorConnectTimeout time.Duration
	MonitorQueryTimeout   time.Duration

	// Engine selects the metadata to read. Default EngineAuto.
	Engine Engine

	// Logger receives phase changes, DNS and topology events, the
	// readiness line and the switchover summary (Info), metadata
	// anomalies (Warn) and monitor errors (Debug), each before
	// [Router.Status] shows it (its handler must not call the Router).
	// Default: the factory's logger (holdfast.WithLogger), else none — a
	// library writes no log line unless asked to.
	Logger *slog.Logger
}
