package failover

import (
	"log/slog"
	"time"
)

// Config configures writer-failover routing: give it to
// holdfast.WithFailover. The zero Config works: every zero field takes its
// default, and holdfast.New reports an invalid field (a negative duration,
// an unknown mode, a malformed template or alias) as a
// *holdfast.ConfigError that names it. A Config is plain data; the factory
// copies it.
//
// The defaults, and what they bound:
//
//	field                      default  the AWS wrappers'
//	-------------------------  -------  ---------------------------------
//	RefreshInterval            30 s     clusterTopologyRefreshRateMs
//	FastInterval               100 ms   clusterTopologyHighRefreshRateMs
//	FastFor                    30 s
//	HeartbeatInterval          200 ms
//	FailureTimeout             400 ms
//	HoldTimeout                30 s
//	ConnectTimeout             5 s
//	Readers.RefreshInterval    5 s      (the reader endpoint's DNS TTL)
//	Readers.HoldTimeout        5 s
//
// A writer that stops answering is presumed down at most
// HeartbeatInterval + 2×FailureTimeout after it stops (1 s with the
// defaults); one that refuses or resets connections at once.
//
// The failover modes of the AWS wrappers (JDBC wrapper, failover2 plugin)
// map onto Config as follows; the wrappers act when a connection fails,
// holdfast when the topology changes (and on a pool's first connection to
// a reader):
//
//	failoverMode      wrapper: after a failure, reconnect to     holdfast
//	----------------  -----------------------------------------  ----------------------------------------------
//	strict-writer     the new writer (default, but on the        the cluster endpoint, always; an instance
//	                  reader endpoint)                           endpoint with FollowWriter
//	reader-or-writer  a reader, else the writer (default on      the reader endpoint: reader routing (the
//	                  the reader endpoint)                       default); a reader down, departed or lagging
//	                                                             is left, its connections cut (or retired,
//	                                                             when lagging)
//	strict-reader     a reader, else an error                    the reader endpoint with Readers.Hold: a
//	                                                             bounded wait, then a *HoldError
//	(no failover)     -                                          an instance endpoint with Pinned (the default)
type Config struct {
	// InstanceTemplate names the cluster's instance endpoints: "?" stands
	// for the server id (aurora_replica_status()'s server_id), as in the
	// AWS wrappers' clusterInstanceHostPattern, e.g.
	// "?.abc123.us-east-1.rds.amazonaws.com" or "?.db.example.internal:5432".
	// Default: derived from the pool's host when it is an RDS endpoint
	// (mydb.cluster-abc123.us-east-1.rds.amazonaws.com gives
	// "?.abc123.us-east-1.rds.amazonaws.com"). Required for a pool on an IP
	// address or a CNAME of your own.
	InstanceTemplate string

	// Aliases maps names of your own to the RDS endpoint each stands for:
	// a CNAME or Route 53 alias such as "db.orders.internal" →
	// "orders.cluster-abc123.us-east-1.rds.amazonaws.com". A pool on an
	// alias is routed as a pool on its endpoint: the instance endpoints
	// and the reader endpoint are derived from the endpoint, it shares the
	// endpoint's monitor, and an alias of a writer (cluster) endpoint is
	// held and redirected through a failover like the endpoint itself
	// (TestAlias: writes again 131 ms after the promotion; without the
	// alias, after DNS moved, 3.6 s). Its DNS is checked by the alias, the
	// name the pool resolves. Without an entry, a pool on a name of your
	// own needs InstanceTemplate and is not redirected (its connections to
	// an old writer are still cut), and the first write by it that reaches
	// a standby (25006) logs a warning once: the name may be one for the
	// writer endpoint, which holdfast cannot tell from the outside.
	Aliases map[string]string

	// InstancePools is what a pool on an instance endpoint does through a
	// failover: Pinned (the default) keeps it on its instance, a reader
	// after the failover; FollowWriter routes it as a pool on the cluster
	// (writer) endpoint, to the writer of the moment, as the AWS wrappers'
	// failoverMode strict-writer. holdfast.PoolInstanceMode chooses for
	// one pool.
	InstancePools InstanceMode

	// Readers configures reader routing for the pools on the reader
	// endpoint: by default each new connection goes to the reader with
	// the fewest of the pool's connections.
	Readers ReaderConfig

	// Global configures routing across the Regions of an Aurora Global
	// Database: see GlobalConfig.
	Global GlobalConfig

	// RefreshInterval is how often the topology is read while nothing is
	// wrong. Default 30 s.
	RefreshInterval time.Duration
	// FastInterval is how often it is read, and every instance probed,
	// from the first sign of trouble until FastFor after the last one.
	// Defaults 100 ms and 30 s.
	FastInterval time.Duration
	FastFor      time.Duration

	// HeartbeatInterval is how often the monitor pings the writer on its
	// own connection; FailureTimeout bounds each ping and each probe
	// connection during trouble. A writer that stops answering (a hang, a
	// black hole) is suspected when a ping times out, at most
	// HeartbeatInterval + FailureTimeout after it stops (600 ms with the
	// defaults), and presumed down when a fresh connection to it fails or
	// times out too: at most HeartbeatInterval + 2×FailureTimeout (1 s). A
	// writer that refuses or resets connections (a crash, a restart) is
	// seen at once, with the next ping or the pool's own error. Defaults
	// 200 ms and 400 ms.
	HeartbeatInterval time.Duration
	FailureTimeout    time.Duration

	// HoldTimeout is the longest a new connection by the writer endpoint
	// is held while the writer is down and no new one is known (the
	// caller's context bounds it too). Then it fails with a *HoldError.
	// Default 30 s.
	HoldTimeout time.Duration

	// ConnectTimeout bounds the monitor's own connection to the writer
	// while nothing is wrong. Default 5 s.
	ConnectTimeout time.Duration

	// Logger receives the monitor's lines (a failover at Info, a suspect
	// writer at Debug). Default: the factory's logger, else
	// slog.Default().
	Logger *slog.Logger

	// OnEvent, when set, is called with each event of the monitor's
	// timeline (Status.Events), on the monitor's goroutine; it must not
	// block. holdfast's factory counts them in the
	// holdfast.failover.events metric.
	OnEvent func(Event)

	// Redact, when set, is applied to the error texts the monitor logs
	// and reports in Status. holdfast's factory sets it to its redactor
	// of the passwords and tokens it has seen.
	Redact func(string) string
}

// InstanceMode is what a pool on an instance endpoint (an RDS instance
// endpoint, an IP address, a name of your own that Config.Aliases does not
// list) does when the writer changes: Config.InstancePools, or
// holdfast.PoolInstanceMode for one pool.
type InstanceMode int

// The instance modes.
const (
	// Pinned keeps the pool on its instance, whatever its role: its
	// connections are cut when the instance stops being the writer (or
	// leaves the topology) and reconnect to it, a reader then, where
	// writes fail with 25006 (TestInstancePools/pinned, the control). The
	// default.
	Pinned InstanceMode = iota
	// FollowWriter routes the pool as a pool on the cluster (writer)
	// endpoint: its connections go to the writer of the moment by address
	// (TLS still verifies, and IAM tokens are for, the configured host),
	// are held while the writer is down, cut when it changes, and a
	// connection that reaches a reader is refused and retried to the
	// writer. The instance endpoint is where the pool finds the cluster,
	// not where it stays: a pool on a reader's instance endpoint goes to
	// the writer too (the AWS wrappers' strict-writer). Its DNS is not
	// checked — it never names the writer of the moment — so the redirect
	// is permanent and Status.Routing says "normal".
	//
	// TestInstancePools/follow-writer, a crash under 4 writers on the
	// writer's instance endpoint (three runs): writes again 37–116 ms
	// after the promotion, the longest pause 0.57–0.63 s, 1–4 of
	// 24,000–32,000 failed (in flight on the old writer: outcome unknown
	// or EOF), none with 25006, none lost, every row written after the
	// promotion on the new writer, and new connections after a Reset on
	// it too while the instance endpoint names the old writer, back as a
	// reader.
	FollowWriter
)

// GlobalConfig configures failover routing on an Aurora Global Database
// (one primary Region, up to five read-only secondaries).
//
// What the servers tell: which instances the global cluster has, which
// one is the writer and the Region of each, from
// aurora_global_db_instance_status() (server_id, session_id
// MASTER_SESSION_ID for the writer, aws_region, visibility_lag_in_msec),
// and how far each secondary Region trails, from aurora_global_db_status()
// (rpo_lag_in_msec, durability_lag_in_msec), which every instance of every
// Region answers. holdfast reads them once the pool's servers answer both
// functions with more than one Region (as the AWS wrappers detect a
// global cluster); no host pattern tells it the Regions.
//
// What they do not tell: a Region's instance endpoints. Aurora names
// them "<server_id>.<hash>.<region>.rds.amazonaws.com" with a hash of the
// account that differs per Region, and no function, no certificate name
// of another Region and no name of the global writer endpoint carries
// it. holdfast derives the hash of the Region of the pool's own endpoint
// (a Region's cluster, reader or instance endpoint, or an alias of one in
// Config.Aliases); every other Region's comes from Regions. A Region
// without one is not probed or routed to (one WARN names it and this
// field): a pool on the global writer endpoint then follows the writer
// into it by DNS only, refusing the servers that are not the writer.
//
// A pool on the global writer endpoint
// (<name>.global-<id>.global.rds.amazonaws.com) needs Regions (without
// it, failover routing is off for the pool, as before, with one Info
// line). It is routed as a pool on a cluster endpoint, across Regions:
// each new connection goes to the writer of the moment by address, while
// TLS still verifies the global name (Aurora's certificates name it in
// every Region) and an IAM token (package rdsiam) is minted for the
// configured host, the global name, with rdsiam.Config.Region — the
// global name carries no Region, and holdfast does not sign again for
// the Region the writer moved to: set the Region your IAM policy and
// the global endpoint's documentation ask for.
// Through a managed switchover (SwitchoverGlobalCluster) the monitor's
// heartbeat (aurora_global_db_status() on the writer, every
// HeartbeatInterval) sees the writer refuse writes and holds new
// connections at once (HoldTimeout) while no instance takes writes,
// probing every instance every FastInterval/4 meanwhile; it routes to
// the promoted writer as soon as it takes writes — before the global
// name's DNS moves, and before the topology names it — and cuts every
// connection to the old writer.
// Through a failover with data loss (FailoverGlobalCluster
// --allow-data-loss) it does the same, and its "region failover" event
// (Event.FromRegion, Event.RPOLag) names the Region that lost what it had
// not replicated: about the last rpo_lag_in_msec seen before it went down.
//
// A pool on a secondary Region's cluster (writer) endpoint, which Aurora
// keeps inactive (it leads to a read-only instance), is a reader pool of
// that Region while the writer is elsewhere (the writer's Region is read
// from the servers: no Regions entry is needed for it): its connections
// are not refused, nor held while the writer is down, a write through it
// fails with the server's 25006 once, is not retried (the transaction
// runner returns a *WriterRegionError), and does not make the
// monitor probe; so does a pool on the primary Region's cluster endpoint
// once the writer moved to a Region it cannot follow; with InstancePools
// FollowWriter it follows the writer across Regions instead (by address,
// keeping the configured name for TLS: its certificate must name the
// endpoint, so prefer the global writer endpoint for that). A pool on a
// Region's reader endpoint is balanced over that Region's readers.
type GlobalConfig struct {
	// Regions maps a Region's name ("us-west-2") to where its instance
	// endpoints are: one of its RDS endpoints (its cluster endpoint,
	// "orders.cluster-abc123.us-west-2.rds.amazonaws.com", gives
	// "?.abc123.us-west-2.rds.amazonaws.com"), or an instance template
	// with "?" for the server id, for custom domains
	// ("?.db.us-west-2.example.internal"). The Region of the pool's own
	// RDS endpoint needs no entry.
	Regions map[string]string

	// HomeRegion is the Region the service runs in ("us-east-1"); with it,
	// OutOfHome says what a pool meant for writes (on the global writer
	// endpoint, or on a cluster endpoint that is not inactive) does while
	// the writer is in another Region. "": no home, the writer is followed
	// wherever it is.
	HomeRegion string
	// OutOfHome is what such a pool does while the writer is outside
	// HomeRegion: OutOfHomeFollow (the default), OutOfHomeReadOnly or
	// OutOfHomeHold.
	OutOfHome OutOfHomeMode

	// AccessibleRegions, when not empty, are the only Regions the service
	// can reach (its network has no route to the others): instances of
	// any other Region are left out of the topology — never probed,
	// dialed or routed to — and a writer in one is said loudly (one WARN
	// at each move there) while pools meant for writes are held
	// (HoldTimeout) as while no writer is known. HomeRegion, when set,
	// must be one of them.
	AccessibleRegions []string
}

// OutOfHomeMode is what a pool meant for writes does while an Aurora
// Global Database's writer is outside GlobalConfig.HomeRegion.
//
// The AWS JDBC wrapper's gdbFailover modes (failoverHomeRegion,
// activeHomeFailoverMode for a writer in the home Region,
// inactiveHomeFailoverMode for one outside it) map onto holdfast's as
// follows; holdfast's pools keep their kind (a pool on a writer endpoint
// stays meant for writes, a reader pool reads), where the wrapper turns a
// connection into another kind:
//
//	wrapper mode                 holdfast
//	---------------------------  --------------------------------------------------------------
//	strict-writer                OutOfHomeFollow (the default): the writer, wherever it is
//	home-reader-or-writer        a reader pool on the home Region's reader endpoint (ReaderConfig,
//	                             Hold false: the writer when no home reader is up)
//	strict-home-reader           OutOfHomeReadOnly for pools meant for writes; a reader pool on the
//	                             home Region's reader endpoint with ReaderConfig.Hold for readers
//	strict-out-of-home-reader    a reader pool on that Region's reader endpoint (GlobalConfig.Regions
//	                             names it)
//	strict-any-reader            OutOfHomeReadOnly (home readers); reader pools per Region
//	out-of-home-reader-or-writer a reader pool on the other Region's reader endpoint, Hold false
//	any-reader-or-writer         a reader pool with Hold false (its Region's readers, else the writer)
//
// The wrapper's documented pattern for turning a Region's deployment
// read-only when the writer leaves (inactiveHomeFailoverMode
// strict-any-reader) is OutOfHomeReadOnly, with a typed error instead of
// failovers and 25006 retries.
type OutOfHomeMode int

// The out-of-home modes.
const (
	// OutOfHomeFollow follows the writer into any Region (the default).
	OutOfHomeFollow OutOfHomeMode = iota
	// OutOfHomeReadOnly turns the pool read-only while the writer is
	// outside the home Region: its new connections go to the home
	// Region's readers by address (the freshest by
	// visibility_lag_in_msec, within Readers.MaxLag; TLS still verifies
	// the configured name), reads continue there, no connection reaches
	// the writer, and a write gets the server's 25006 once — the
	// transaction runner returns a *WriterRegionError with OutOfHome
	// set, Fatal — and Status.OutOfHome
	// says so. When the writer comes home, the pool's connections to
	// the home readers are cut and new ones go to the writer.
	OutOfHomeReadOnly
	// OutOfHomeHold holds the pool's new connections while the writer is
	// outside the home Region, up to HoldTimeout (then a *HoldError), as
	// while no writer is known: for a writer that is expected back
	// soon.
	OutOfHomeHold
)
