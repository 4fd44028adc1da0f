// Package lb takes a service's nodes out of an L4 load balancer before a
// deploy, with proof that their traffic is gone, and puts them back after.
//
// It replaces console work on F5 BIG-IP and A10 ACOS devices with one
// procedure:
//
//	lock the group → force its members offline → poll their current
//	connections every second → zero: deploy, then enable
//	                         → still busy after 2 minutes: abort the deploy
//
// # Balancers
//
// [Balancer] is the vendor-neutral interface: login, logout and keep-alive
// (F5 token extension; A10 re-authentication, as aXAPI has none), a
// member's [AdminState] ([Enabled], [Disabled], [ForcedOffline]) and
// current connections, and setting the state. The adapters are
// [github.com/holdfast-db/holdfast/lb/f5] (iControl REST) and
// [github.com/holdfast-db/holdfast/lb/a10] (aXAPI v3); both re-login once
// by themselves when a call answers that the session expired, and both
// report failures as an [*APIError] whose [Kind] says what the device
// answered:
//
//	| Kind              | Example                                     | Retryable |
//	|-------------------|---------------------------------------------|-----------|
//	| KindSession       | 401 again after the one re-login (A10)      | no        |
//	| KindAuth          | wrong password, F5 token limit reached      | no        |
//	| KindBusy          | A10 code 1023464193, F5 503 (restarting)    | yes       |
//	| KindUnavailable   | connection refused, timeout, other 5xx      | yes       |
//	| KindNotFound      | no such pool, member, server, partition     | no        |
//	| KindNoPrivilege   | F5 401 after re-login or 403, A10 419545856 | no        |
//	| KindStatsDisabled | A10 stats-data-disable: counters read 0     | no        |
//	| KindBadResponse   | unparsable answer                           | no        |
//	| KindRejected      | other 4xx                                   | no        |
//
// Find it with errors.AsType (or errors.As) and ask it:
//
//	if ae, ok := errors.AsType[*lb.APIError](err); ok && ae.Retryable() {
//		// busy or unreachable: try again later
//	}
//
// Credentials and session tokens never appear in errors: device messages
// are redacted. Sessions are logged out on every path (an F5 token holds
// one of the user's 100 token slots), and an expired session is
// re-established once, transparently.
//
// An F5 member with a pool and a port is a pool member; with neither, a
// node (all its pools). An A10 member is a real server, or one of its ports.
// A10 "disabled" maps to disable-with-health-check and "forced offline" to
// disable. A10 service-group members are not supported: name the server
// or its port.
//
// # Errors
//
// Failures are typed errors, found with errors.AsType or errors.As, and
// each type's doc says whether it is retryable: [*APIError] (a balancer
// call), [*NotDrainedError], [*StateMismatchError], [*NotPermittedError],
// [*LockedError], [*LockLostError], [*ConfigError] and [*StoreError]. Like
// the error types of holdfast's other packages, each but *APIError also
// matches one sentinel through errors.Is ([ErrNotDrained], [ErrLocked],
// ...); for an *APIError, compare its Kind. The only sentinel without a
// type is [ErrSkipped], recorded for the members a group request did not
// start.
//
// # Draining
//
// [Drain] drains one member. It reads the member first and refuses one
// whose connections the device does not count (an A10 server with
// statistics disabled reads 0 whatever its traffic), before changing
// anything. Then it forces the member offline, checks the read-back, and
// polls state and connections with the drain algorithm holdfast's
// readiness package uses for in-process drains (poll at once and every
// [DrainConfig].Interval, default 1 s; give up after Timeout, default
// 2 min, with one last poll at the bound; say what was still in use):
//
//   - zero connections: drained;
//   - the bound passes: a [*NotDrainedError] with the last count, and the
//     member stays forced offline for the caller to decide;
//   - the member leaves ForcedOffline (someone enabled it): a
//     [*StateMismatchError];
//   - a transient API error: tolerated [DrainConfig].MaxTransient times in
//     a row (default 3); a poll that failed never counts as drained.
//
// Connections only reach zero if clients let go: pooled clients
// (pgxpool, HTTP keep-alive, F5 OneConnect) keep idle connections open
// forever unless they recycle them. Give pgxpool a MaxConnLifetime and
// MaxConnIdleTime shorter than the drain timeout, or drain the service
// from the inside first (holdfast's readiness package).
//
// # Groups, locks and permissions
//
// A [Controller] runs a [Request] on a named group of [Target]s: it checks
// [Permissions] (operator → groups), takes the group's lock from a
// [Locker], writes the audit entry, logs in, reads every member, changes
// them [ControllerConfig].Concurrency at a time (draining, for
// [ActionDrain]), then logs out, unlocks and records the result. A refused
// request (not permitted, locked, unknown group) makes no call to any
// balancer. Once a member fails, members not yet started are skipped
// ([ErrSkipped]); with [Request].RestoreOnFailure, the members changed are
// put back as they were.
//
// Groups may overlap (an "all-web" group holding the members of
// "payments" and "search" is a legitimate configuration), so a group's
// lock also locks each of its members on its device, all or nothing: a
// request on a group one of whose members another group's holder drives
// is refused ([*LockedError] naming the holder, its group and the member)
// before any call. A pool member or server port locks its node shared, a
// whole node locks it exclusively, so a node and the pool members on it
// exclude each other. Members are known by their device
// ([DeviceIdentifier]: "f5 bigip.example.net:443 Common"), not by the
// configuration's name for the balancer, so two configurations sharing
// the database exclude each other too.
//
// [PGStore] keeps locks and the audit trail in PostgreSQL. A lock is a
// session-level advisory lock held on a dedicated connection, plus a row
// naming its owner, host and start, so that [Controller.Status] and the
// refusal ([*LockedError]) can name the holder. If the holder crashes, its
// session ends and PostgreSQL frees the lock; a [Lease] is checked before
// every change, so a holder that lost its session stops
// ([*LockLostError]).
//
// # Audit
//
// Every control request, refused ones included, is an [Entry]: who, what,
// which members, each member's state before and after, the connections
// seen (before, at the first poll and at the last), polls, duration and
// [Result]. It is written as a structured log/slog line and as a row of
// holdfast_lb_audit, once when the work starts (Result "running", which a
// crash leaves behind) and once with the result. Without an audit row no
// change is made.
//
// The operator ([Request].Operator) is asserted by the caller, not
// authenticated: the command line takes it from -operator,
// $HOLDFAST_LB_OPERATOR or $USER. Beside it each entry records an
// [Origin]: how the operator was given ([Request].OperatorVia), the OS
// account of the process (by user ID) and the CI system's identity
// variables ([ProcessOrigin]), as evidence for the reader of the trail.
// [Entry].Notes records warnings such as a balancer reached over plain
// http or without certificate verification
// ([ControllerConfig].TransportNotes). The threat model is lb/SECURITY.md.
//
// # Configuration
//
// [Config] is the JSON file of the holdfast-lb command: balancers (vendor,
// endpoint, username, password or the variable holding it, partition,
// TLS), groups, operators and drain bounds. [LoadConfig] rejects unknown
// keys and names the first invalid field: among others an http://
// endpoint without allow_insecure_http, insecure_skip_verify with
// ca_file, a drain interval below [MinDrainInterval] (100 ms) or a drain
// timeout above [MaxDrainTimeout] (1 h). Passwords are [Secret]s, which
// never print. The command's documentation
// ([github.com/holdfast-db/holdfast/lb/cmd/holdfast-lb]) has an example
// file.
//
// # Locks held across requests
//
// [Controller.Acquire] checks the permission and takes the group's lock
// ([Request].LockWait waits for it) without doing anything under it;
// requests with that [Request].Lease run under it and leave it held, so a
// deploy (package [github.com/holdfast-db/holdfast/lb/deploy]) drains,
// deploys and enables under one lock. [Request].OnStart is called once a
// request holds its lock and its audit entry is written.
//
// # Reading every group
//
// A [Monitor] reads groups' status like [Controller.Status] but keeps its
// balancer sessions open between reads (keep-alive, re-login after a
// session error, logout at Close), for a console that reads every group
// every few seconds (package [github.com/holdfast-db/holdfast/lb/console]).
// [PGStore.Holders] and [PGStore.Entries] give it the lock holders and the
// audit trail.
//
// # Events and metrics
//
// A [Notifier] ([ControllerConfig].Notifier) is told about each request's
// outcome as an [Event]: drain started, drained, timed out (with the
// [BusyMember]s), enabled, disabled, forced offline, lock refused, failed.
// Package [github.com/holdfast-db/holdfast/lb/notify] sends them to Teams,
// Slack and JSON webhooks without ever blocking a drain. [Metrics]
// ([NewMetrics], [ControllerConfig].Metrics, [MonitorConfig].Metrics)
// records members by phase, requests, drain durations, timeouts, lock
// waits and API errors by vendor as OpenTelemetry instruments; [MeterName]
// lists them with their Prometheus names.
//
// # The module
//
// This module (github.com/holdfast-db/holdfast/lb) does not depend on
// holdfast's root module: it has its own copy of the drain algorithm,
// kept equal to the root's by a test, so that
// go install github.com/holdfast-db/holdfast/lb/cmd/holdfast-lb@VERSION
// resolves on its own. It is tagged lb/vX.Y.Z (RELEASING.md).
//
// # Testing
//
// Packages [github.com/holdfast-db/holdfast/lb/f5/f5test] and
// [github.com/holdfast-db/holdfast/lb/a10/a10test] are httptest fakes of
// both APIs, for your tests.
//
// # Concurrency
//
// Controller, Monitor, Metrics and PGStore are safe for concurrent use; so
// are the adapters. Controller.Do joins every goroutine it starts before
// it returns.
package lb
