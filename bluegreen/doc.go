// Package bluegreen keeps a pgxpool working through an RDS or Aurora
// PostgreSQL blue/green switchover.
//
// During a switchover a plain pool sees dropped connections and refused
// connects and, because DNS lags, opens new connections to the old blue
// instance after it was renamed and made read-only: writes fail with
// SQLSTATE 25006, or land in the wrong place. A [Router] watches the
// deployment's status in the metadata RDS publishes, keeps an inventory of
// the blue and green endpoints and their addresses, and, phase by phase,
// pins host names to addresses, holds traffic while the switch happens, and
// refuses connections that would go astray. It does for pgx what the AWS
// Advanced JDBC Wrapper's blue/green plugin does for JDBC, without the
// defects of its Go port (see the end of this comment).
//
// # Enabling it
//
// With holdfast, give the zero Config (every field has a default) to the
// factory:
//
//	f, err := holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{}))
//	// ...
//	defer f.Close() // stops the monitors
//	pool, err := f.NewPool(ctx, cfg)
//	// ...
//	st := f.BlueGreen(pool).Status()
//
// Without holdfast, install a Router into a pgxpool config yourself and
// close it with the pool:
//
//	r, err := bluegreen.New(cfg, bluegreen.Config{})
//	// ...
//	defer r.Close()
//	pool, err := pgxpool.NewWithConfig(ctx, cfg)
//
// The database user needs to read the metadata: on RDS PostgreSQL, CREATE
// EXTENSION rds_tools and, for a user that is not the administrator, GRANT
// USAGE ON SCHEMA rds_tools and GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA
// rds_tools; on Aurora PostgreSQL nothing. On an engine without the
// metadata the Router finds it absent and routes nothing, at the cost of two
// idle monitor connections and an existence check per BaselineInterval.
//
// # Defaults
//
// Every zero field of [Config] takes its default (the Default* constants:
// those of the AWS Advanced JDBC Wrapper's blue/green plugin, and monitor
// timeouts, which it does not have):
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
//	Logger                          the factory's (holdfast.WithLogger), else slog.Default()
//
// # Monitors
//
// Two monitors, one for blue (SOURCE) and one for green (TARGET), each on
// its own connection outside the pool, read the metadata:
// pg_catalog.get_blue_green_fast_switchover_metadata(text) on Aurora,
// rds_tools.show_topology(text) on RDS, found by an existence check
// (to_regprocedure) and read with SELECT *, columns by name (version,
// endpoint, port, role, status; id optional), statuses and roles in any
// case. A function that is absent, zero rows, a failed query and an unknown
// status or version are kept apart: only rows with a known status move the
// phase; an unknown version is read as 1.0 with a warning.
//
// Both monitors start on the pool's host; the green one moves to the green
// endpoint once the metadata names it. They connect with a copy of the
// pool's connection config (credentials, TLS, DialFunc, LookupFunc),
// without target_session_attrs (green is read-only before the switch) and
// without the pool's tracer, with application_name
// "holdfast-bluegreen-monitor" and their own connect and query timeouts.
// With holdfast they dial through the factory's dial path and fetch the
// factory's password, and never run the pool's own BeforeConnect; with
// [New], they run the BeforeConnect that was on the config before it. They
// poll every BaselineInterval (60 s) while no deployment exists, every
// IncreasedInterval (1 s) once one exists, and every HighInterval (100 ms)
// from PREPARATION until the switchover has settled. A monitor whose
// connection breaks reconnects with a backoff that starts at HighInterval.
//
// A monitor reads its server on a goroutine of its own, which it joins
// (and [Router.Close] joins too, within its bound). While a connect or a
// query has not answered (a server that silently drops them holds it for
// MonitorConnectTimeout or MonitorQueryTimeout), the monitor keeps
// resolving its role's hosts at the polling interval and reporting them,
// so that "Blue DNS updated" is seen, and held traffic released, about
// HighInterval plus the resolver's TTL after DNS moves, not when the
// connect gives up.
//
// On Aurora they also read the cluster's topology, as the AWS wrappers do:
// SELECT server_id, session_id FROM aurora_replica_status(), on the role's
// own server, found by the same existence check as the metadata (absent:
// nothing is read, and nothing fails). Each server_id is an instance
// endpoint, named after the role's cluster endpoint
// (mydb.cluster-abc.us-east-1.rds.amazonaws.com gives
// <server_id>.abc.us-east-1.rds.amazonaws.com), and session_id
// MASTER_SESSION_ID marks the writer. The instances join the inventory with
// the metadata's endpoints, so a pool on an instance endpoint is routed
// even when the metadata lists only the cluster endpoints, and connections
// that the reader endpoint led to any blue reader are dropped, not only to
// the reader it resolved to when the switchover began. The topology is read
// until the start snapshot is complete, not during the rest of a
// switchover. On RDS (rds_tools.show_topology) the metadata rows are the
// topology already; endpoints that are not RDS-shaped (your own CNAMEs)
// give no instance names, and the Router logs it once.
//
// They resolve every blue and green endpoint through the pool's
// LookupFunc (the system resolver unless you set one), which is how they
// see DNS move. When PREPARATION is first seen, the hosts and their
// addresses are frozen as the start snapshot; it is completed while
// PREPARATION lasts but never overwritten. Against it the Router detects,
// and latches with a timestamp: "Blue DNS updated" (every blue host
// resolves to a new address), "Green DNS removed" (no green host resolves)
// and "Green topology changed" (the green rows no longer carry any green
// name).
//
// # Routing
//
// The routing is an immutable snapshot swapped atomically when the state
// changes; the pool's hooks read it with one atomic load, and do nothing
// else while no switchover is under way.
//
//	| phase                  | new connection to a blue name           | to a green name                      | Acquire, statements        |
//	|------------------------|-----------------------------------------|--------------------------------------|----------------------------|
//	| NOT_CREATED, CREATED   | as asked                                | as asked                             | as asked                   |
//	| PREPARATION            | blue start address                      | as asked                             | as asked                   |
//	| IN_PROGRESS            | held                                    | held                                 | held; blue conns dropped   |
//	| POST                   | green address of the corresponding node | green address, then rejected once    | as asked; blue conns       |
//	|                        | (held until it is known), as asked once | green took the blue names, as asked  | dropped                    |
//	|                        | blue DNS points at green                | once green DNS is removed             |                            |
//	| COMPLETED              | as POST until blue DNS is updated and green DNS removed, then as asked                                             |
//
// Addresses are pinned through the connection's LookupFunc only: the host
// name stays the one asked for, and TLS with sslmode=verify-full verifies
// the certificate against it, or against the names of the server it was
// routed to (see Names, below). The corresponding node is chosen by role
// and sorted name: writer cluster endpoint to writer cluster endpoint,
// reader to reader, blue writer instance to green writer instance (the
// writer is the topology's, else the instance at the cluster endpoint's
// address), blue readers to green readers round robin.
//
// New connections are held in BeforeConnect (which pgxpool runs without the
// caller's cancellation), Acquire in PrepareConn, statements on acquired
// connections in the query tracer (also batches, CopyFrom and Prepare).
// Connections to the old blue instance are dropped when IN_PROGRESS begins:
// idle ones are closed at once (the Router learns its pool at the pool's
// first Acquire), others are destroyed when next acquired,
// and a statement on one in use fails with a [*DroppedError]. A held
// caller wakes when the routing changes, never on a poll, and waits at
// most Config.ConnectTimeout (30 s) and its context: then it fails with a
// [*SuspendError]. Nothing was sent, so it is Transient, but
// holdfast.Factory.Acquire does not wait it out a second time: the bound is
// the caller's whole wait. A rejected connection fails at once with a
// [*RejectError] (Fatal). A [*DroppedError] is Transient: the transaction
// did not commit, so retry it whole. [Rule] classifies the three for
// package classify.
//
// IN_PROGRESS is released early when blue DNS already points at green.
// A switchover timer (SwitchoverTimeout, 180 s from PREPARATION) ends the
// switchover whatever the metadata says, from a timer of its own rather than
// on the next change; after it a status stuck in IN_PROGRESS routes nothing.
// A rollback is recognised only when the green monitor reads an earlier
// phase than before, before COMPLETED, in two reads in a row (one server
// whose copy of the metadata trails the others' is not a rollback), never
// from an absent, empty or failed read.
//
// # Names: IAM tokens and certificates
//
// In POST a blue name leads to green, by the routing's substitution or,
// once blue DNS is updated, by DNS; but green answers to its green names
// until it takes the blue names, and RDS renews its node certificate for
// the blue names only some time after that rename, sometimes after
// SWITCHOVER_COMPLETED. So a connection by a blue name that reaches green
// would present an IAM token green refuses (SQLSTATE 28000), and fail
// sslmode=verify-full. For each host name that leads to green, the
// routing knows the server's names: green node g (the counterpart of blue
// name b) answers to g until the metadata shows the rename ("Green
// topology changed"), then to g without "-green-xxxxxx" (normally b), as
// the AWS JDBC wrapper assumes (its PR #1642).
//
// Tokens. [AuthHosts] gives the hooks after the Router's (the password
// layer of holdfast.WithHostPasswordFunc and rdsiam.With, the BeforeConnect
// that [New] chains, a monitor's connect hook) the names to issue the
// token for, in order: in POST the green name, then the blue name (the
// blue name first once the metadata shows the rename). holdfast issues
// the first; after a 28000 its one retry with a fresh token is issued for
// the second, which covers the moment between the rename and the next
// poll. The green monitor's connection gets a token for its green name,
// then for the blue name after the rename; a monitor whose connection was
// refused with 28000 tries the other name at its next connect. Before POST
// (and with no switchover) there are no names: the token is for the
// connection's host.
//
// Certificates. The certificate policy, for sslmode=verify-full: a
// connection by a name that leads to green accepts the server's
// certificate when it is valid for the name asked for, or for the green
// name the routing substituted, or for that green name's blue name; never
// for any other name, and always with the whole chain verified. It is
// done on the connection's own tls.Config (pgxpool's per-connection copy,
// changed in place so that pgx still finds the client certificate of
// sslcert), with InsecureSkipVerify set and the verification crypto/tls
// would do (chain to RootCAs, time, server authentication) done in
// VerifyConnection followed by the name check, then the config's own
// VerifyConnection. A config that verifies no host name (verify-ca,
// require) is left alone.
// It applies in POST, to the pool's connections and the monitors', and for
// SwitchoverTimeout (180 s) after a completed switchover to the blue names,
// which DNS then sends to green whose certificate may still lack them.
// [Status] counts the handshakes it accepted for a counterpart name
// (AliasedCerts) and lists the names in force (Routing.Names). The
// counterpart is learned from the metadata read over the same verified TLS
// from the deployment's own servers: a server that can present a valid
// certificate for the green name is the green instance.
//
// A monitor that reads old blue by a blue name after the rename issues its
// token for the -old1 name and accepts old blue's certificate for it.
//
// # The end of a switchover
//
// When COMPLETED is seen and DNS has caught up, or on a rollback, or when
// the timer expires, the Router logs the timeline (Info, through the
// Config.Logger) in the AWS wrappers' table form, keeps it as a [Summary]
// ([Router.LastSummary], [Status].LastSummary), clears its routing and its
// inventory, and its monitors start over for the next deployment. Until
// both monitors have read a phase outside PREPARATION to POST, such phases
// are ignored, so that a stuck status or a server whose metadata lags does
// not start the same switchover again.
//
// The timeline's phase events carry the times the metadata reported them;
// its last event, "Routing normal", is when the Router went back to plain
// host names. The two differ: COMPLETED is often reported before DNS has
// caught up, and until it has, routing stays as in POST.
//
// The summary's log line has the message "bluegreen: switchover COMPLETED"
// (or ROLLED BACK, TIMED OUT) and the table of [Summary.String] in its
// summary attribute. Before a switchover, once the green side is mapped,
// the Router logs a one-time line with the blue → green mapping and
// addresses:
//
//	level=INFO msg="bluegreen: target topology recognized" bgd_id=1 mapping="orders.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com (10.0.1.17) -> orders-green-abc123.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com (10.0.2.41), ..."
//
// [Router.Status] gives the phase, the routing, the mapping,
// the timeline and the monitors at any time, for readiness endpoints and
// dashboards, and [Router.Changed] signals its changes.
//
// # Testing without AWS
//
// Package fakes/bluegreentest runs a blue and a green PostgreSQL on one
// machine, with the real metadata functions and a fake DNS, and plays whole
// switchovers: a normal one, a rollback, DNS moving before POST, a status
// stuck in IN_PROGRESS, slow DNS, and, behind a front end that checks IAM
// tokens by host and presents per-node certificates renewed late, iam and
// node-certs. holdfast's own tests drive the Router through each of them;
// examples/switchover runs a workload through one, with a plain pgxpool
// next to a holdfast pool.
//
// # Differences from the AWS Go wrapper
//
// Its defects, reproduced against the wrapper's own source, are absent
// here: a rejected connection fails at once instead of spinning a core; a
// held connection honours its timeout; PREPARATION and IN_PROGRESS poll at
// HighInterval, not 1 s; a DNS change during IN_PROGRESS does not overwrite
// the start snapshot; the switchover timer runs on its own; a rollback is
// never inferred from a missing or failed read nor from blue; monitors
// restart after a switchover; monitors have timeouts and drop
// target_session_attrs; the routing is published immutably, never mutated
// under readers; an IAM token is issued for the name the server answers
// to, never for an address (the Go wrapper's branch is inverted from
// JDBC's).
package bluegreen
