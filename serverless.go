package holdfast

import (
	"time"

	"github.com/holdfast-db/holdfast/internal/conn"
)

// ServerlessV2Config describes an Aurora Serverless v2 cluster that scales
// to zero (MinCapacity 0, automatic pause), given to [WithServerlessV2].
// The zero value is the defaults: AutoPause 300 s (Aurora's default
// SecondsUntilAutoPause), IdleFor 150 s, WakeFor 60 s.
type ServerlessV2Config struct {
	// AutoPause is the cluster's SecondsUntilAutoPause: how long the
	// instance stays up with no connection before it pauses. 0: 300 s.
	AutoPause time.Duration
	// IdleFor is how long a pool's connection may stay idle before it is
	// closed (the pool's MaxConnIdleTime, at most). 0: AutoPause/2. With
	// the health check every IdleFor/4, an idle pool holds no connection
	// 1.25 IdleFor after its last use, which must come before AutoPause.
	IdleFor time.Duration
	// WakeFor bounds the wake of a paused instance: the one dial into a
	// pool that holds no connection, its retries, and every request's
	// wait for it. 0: 60 s (Aurora resumes in up to 15 s, about 30 s
	// after a day paused).
	WakeFor time.Duration
}

// The defaults of ServerlessV2Config.
const (
	defaultAutoPause = 300 * time.Second
	defaultWakeFor   = 60 * time.Second
)

// WithServerlessV2 is the preset of an Aurora Serverless v2 cluster that
// scales to zero: its pools let the instance pause when idle, and their
// first request after a pause waits for the resume instead of failing.
// It sets, for every pool of the factory:
//
//   - Idle pools close their connections: MinConns and MinIdleConns 0,
//     MaxConnIdleTime IdleFor at most, HealthCheckPeriod IdleFor/4 at
//     most (a shorter one set in the pool's config is kept), so that an
//     idle pool holds no connection 1.25 IdleFor after its last use,
//     before AutoPause.
//   - A long first dial, single-flight: a new connection of a pool that
//     holds none (idle and acquired: 0) may find the instance paused. The
//     pool then wakes it: its outage layer's prober (see [WithOutage]) makes
//     the one dial in flight, bounded by WakeFor — not by the retry
//     policy's AttemptTimeout, which bounds every other dial — and every
//     other connection waits for it, within WakeFor and its caller's
//     deadline. A refusal while the instance resumes (57P03 "the database
//     system is starting up", a refused or reset connection) is
//     Transient and retried at the prober's pace (every 100 ms while
//     requests wait) until WakeFor; after that the database is down, as
//     WithOutage describes. A wait that ends first fails with a
//     [*DatabaseDownError] (Transient) that says the database was waking.
//     A wake that took a second or more (the instance was most likely
//     paused) logs "holdfast: database woke" (INFO) with its wake_s.
//     57P03 and 57P05 (idle_session_timeout) are Transient, as always.
//     The wake costs one connection more (the prober's, closed) at each
//     connect into an empty pool, paused instance or not. Startup's first
//     connection is not a wake (the pool has not connected yet): its
//     dials keep the per-attempt bound and are retried, see below.
//   - Startup waits for a resume: unless [WithStartupPolicy] is given,
//     the startup policy is 10 attempts, 200 ms doubling to at most 2 s
//     with 20 % jitter, WakeFor overall.
//   - The outage layer is on (WithOutage with Off is a *ConfigError).
//   - Holdfast's monitors hold no connection while the pools hold none:
//     the failover monitor (WithFailover, its reader probes included)
//     while every pool on its cluster holds none (failover.Status.Off
//     "idle"), a pool's blue/green monitors (WithBlueGreen) while it holds
//     none. They close their connections and read nothing, keep the
//     routing they knew, and read again once a pool has a connection
//     (the blue/green monitors within 200 ms, the failover monitor
//     within its HeartbeatInterval).
//
// Package readiness reports a pool that wakes as warn, reason "waking",
// and does not query a pool of this factory once it has connected (a
// check through the pool would keep the instance awake): its database's
// state is the outage layer's (waking, database-down). A check of your
// own that queries the database keeps the instance awake. An invalid
// config (a negative duration, IdleFor×1.25 not below AutoPause) makes
// New return a *ConfigError.
func WithServerlessV2(c ServerlessV2Config) Option {
	return func(cfg *config) {
		if c.AutoPause == 0 {
			c.AutoPause = defaultAutoPause
		}
		if c.IdleFor == 0 {
			c.IdleFor = c.AutoPause / 2
		}
		if c.WakeFor == 0 {
			c.WakeFor = defaultWakeFor
		}
		bad := func(field, why string) {
			cfg.fail(&ConfigError{Field: "WithServerlessV2", Why: "invalid ServerlessV2Config",
				Err: &ConfigError{Field: field, Why: why}})
		}
		switch {
		case c.AutoPause < 0:
			bad("AutoPause", "negative")
		case c.IdleFor < 0:
			bad("IdleFor", "negative")
		case c.WakeFor < 0:
			bad("WakeFor", "negative")
		case c.IdleFor+c.IdleFor/4 >= c.AutoPause:
			bad("IdleFor", "an idle pool would hold its connections past AutoPause: IdleFor×1.25 must be below it")
		default:
			cfg.serverless = &c
		}
	}
}

// engineWake is the engine's configuration of c: nil when unset.
func engineWake(c *ServerlessV2Config) *conn.Wake {
	if c == nil {
		return nil
	}
	return &conn.Wake{For: c.WakeFor, IdleFor: c.IdleFor}
}
