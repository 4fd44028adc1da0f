package bgroute

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/internal/bgroute/meta"
	"github.com/holdfast-db/holdfast/internal/cfgerr"
)

// The defaults of bluegreen.Config (its documentation lists them): those
// of the AWS Advanced JDBC Wrapper's blue/green plugin, except the monitor
// timeouts, which it does not set.
const (
	defaultID                    = "1"
	defaultConnectTimeout        = 30 * time.Second
	defaultSwitchoverTimeout     = 180 * time.Second
	defaultBaselineInterval      = 60 * time.Second
	defaultIncreasedInterval     = time.Second
	defaultHighInterval          = 100 * time.Millisecond
	defaultMonitorConnectTimeout = 10 * time.Second
	defaultMonitorQueryTimeout   = 10 * time.Second
)

// Validate reports the first invalid field of c as a *cfgerr.Error (Pkg "bluegreen"; the face reports it as a *holdfast.ConfigError),
// or nil.
func Validate(c bluegreen.Config) error {
	_, _, err := withDefaults(c)
	return err
}

// ID returns c's deployment ID, its default when c has none.
func ID(c bluegreen.Config) string {
	if c.ID == "" {
		return defaultID
	}
	return c.ID
}

// withDefaults returns c with its zero fields set to the defaults, and the
// metadata its Engine selects, or a *cfgerr.Error (Pkg "bluegreen"; the face reports it as a *holdfast.ConfigError).
func withDefaults(c bluegreen.Config) (bluegreen.Config, meta.Engine, error) {
	if d := cfgerr.SetDefaults([]cfgerr.Duration{
		{Name: "ConnectTimeout", Value: &c.ConnectTimeout, Default: defaultConnectTimeout},
		{Name: "SwitchoverTimeout", Value: &c.SwitchoverTimeout, Default: defaultSwitchoverTimeout},
		{Name: "BaselineInterval", Value: &c.BaselineInterval, Default: defaultBaselineInterval},
		{Name: "IncreasedInterval", Value: &c.IncreasedInterval, Default: defaultIncreasedInterval},
		{Name: "HighInterval", Value: &c.HighInterval, Default: defaultHighInterval},
		{Name: "MonitorConnectTimeout", Value: &c.MonitorConnectTimeout, Default: defaultMonitorConnectTimeout},
		{Name: "MonitorQueryTimeout", Value: &c.MonitorQueryTimeout, Default: defaultMonitorQueryTimeout},
	}); d != nil {
		return c, 0, &cfgerr.Error{Pkg: "bluegreen", Field: d.Name, Why: "must not be negative (zero means the default " + d.Default.String() + ")"}
	}
	var engine meta.Engine
	switch c.Engine {
	case "", bluegreen.EngineAuto:
		c.Engine, engine = bluegreen.EngineAuto, meta.EngineAuto
	case bluegreen.EngineAurora:
		engine = meta.EngineAurora
	case bluegreen.EngineRDS:
		engine = meta.EngineRDS
	default:
		return c, 0, &cfgerr.Error{Pkg: "bluegreen", Field: "Engine", Why: "unknown engine " + strconv.Quote(string(c.Engine))}
	}
	c.ID = ID(c)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, engine, nil
}

// engineOf returns the public name of the metadata found.
func engineOf(e meta.Engine) bluegreen.Engine { return bluegreen.Engine(e.String()) }
