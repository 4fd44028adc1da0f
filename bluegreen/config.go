package bluegreen

import (
	"context"
	"log/slog"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen/internal/meta"
)

// Defaults of [Config]. They are those of the AWS Advanced JDBC Wrapper's
// blue/green plugin, except the monitor timeouts, which it does not set.
const (
	DefaultID                    = "1"
	DefaultConnectTimeout        = 30 * time.Second
	DefaultSwitchoverTimeout     = 180 * time.Second
	DefaultBaselineInterval      = 60 * time.Second
	DefaultIncreasedInterval     = time.Second
	DefaultHighInterval          = 100 * time.Millisecond
	DefaultMonitorConnectTimeout = 10 * time.Second
	DefaultMonitorQueryTimeout   = 10 * time.Second
)

// Engine selects the metadata the deployment's status is read from.
type Engine int

const (
	// EngineAuto (the zero value) uses Aurora PostgreSQL's function when it
	// exists, else RDS PostgreSQL's.
	EngineAuto Engine = iota
	// EngineAurora reads pg_catalog.get_blue_green_fast_switchover_metadata(text).
	EngineAurora
	// EngineRDS reads rds_tools.show_topology(text) (CREATE EXTENSION rds_tools).
	EngineRDS
)

// String returns "auto", "aurora" or "rds".
func (e Engine) String() string { return meta.Engine(e).String() }

// MarshalText encodes the engine as its name, for JSON.
func (e Engine) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// Config configures blue/green routing for one pool. The zero value works:
// every zero field takes the default named in its comment (the Default*
// constants). A negative duration is an error. A Config is plain data; the
// Router copies it.
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
	// while a monitor has no connection. A monitor waiting on a connect or
	// a query keeps resolving DNS at the same interval. Defaults 60 s, 1 s,
	// 100 ms.
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
	// Router.Status shows it (its handler must not call the Router).
	// Default: discard — a library writes no log line unless asked to.
	Logger *slog.Logger

	// Observer, when set, receives the Router's telemetry: phase changes,
	// held callers and the end of each switchover. holdfast's factory
	// can set it to its metrics and traces. Default none.
	Observer Observer
}

// Observer receives a Router's telemetry. Phase and Finished are called
// with the Router's lock held, before [Router.Status] shows the change;
// Suspended on the goroutine of the caller that was held. None may block or
// call the Router.
type Observer interface {
	// Phase is called on every change of the merged phase, with its
	// ordinal (a Phase), its name, and whether a switchover is under way.
	Phase(ctx context.Context, phase int, name string, active bool)
	// Suspended is called when a held connect, Acquire or statement
	// (point "connect", "acquire" or "query") stops waiting, with the
	// caller's context, the phase it was held for, how long it waited and
	// the error it ended with (nil: it went on).
	Suspended(ctx context.Context, point, reason string, waited time.Duration, err error)
	// Finished is called when a switchover ends, with the outcome
	// ("COMPLETED", "ROLLED BACK" or "TIMED OUT").
	Finished(ctx context.Context, outcome string)
}

// withDefaults returns c with its zero fields set to the defaults, or a
// *ConfigError.
func (c Config) withDefaults() (Config, error) {
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ConnectTimeout", &c.ConnectTimeout, DefaultConnectTimeout},
		{"SwitchoverTimeout", &c.SwitchoverTimeout, DefaultSwitchoverTimeout},
		{"BaselineInterval", &c.BaselineInterval, DefaultBaselineInterval},
		{"IncreasedInterval", &c.IncreasedInterval, DefaultIncreasedInterval},
		{"HighInterval", &c.HighInterval, DefaultHighInterval},
		{"MonitorConnectTimeout", &c.MonitorConnectTimeout, DefaultMonitorConnectTimeout},
		{"MonitorQueryTimeout", &c.MonitorQueryTimeout, DefaultMonitorQueryTimeout},
	}
	for _, d := range durations {
		if *d.v < 0 {
			return c, &ConfigError{Pkg: "bluegreen", Field: d.name, Why: "must not be negative (zero means the default " + d.def.String() + ")"}
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.Engine < EngineAuto || c.Engine > EngineRDS {
		return c, &ConfigError{Pkg: "bluegreen", Field: "Engine", Why: "unknown engine " + c.Engine.String()}
	}
	if c.ID == "" {
		c.ID = DefaultID
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Validate reports the first invalid field as a *ConfigError, or nil.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}
