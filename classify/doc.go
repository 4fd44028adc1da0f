// Package classify decides whether a failed PostgreSQL connection attempt is
// worth retrying.
//
// holdfast retries new connections only when a later attempt could succeed:
// a refused or reset TCP connection, a server that is restarting or switching
// over, a token endpoint answering 503. Mistakes (a wrong password or role,
// a missing database, bad SQL, a constraint violation) are surfaced at once,
// and so is anything this package does not recognise: unknown errors are
// [Fatal].
//
// [Classify] applies the built-in rules; [New] builds a [Classifier] that
// tries user [Rule]s first, and [Classifier.WithTypes] teaches it error
// types of other packages. Both return a [Verdict] holding a [Class] and a
// short machine-readable Reason that never contains error message text.
//
//	v := classify.Classify(err)
//	if v.Retryable() {
//		// back off and dial again
//	}
//
// # How errors are examined
//
// Decisions are made from error types, sentinel identities, SQLSTATE codes
// and HTTP status codes only, never from message text; Classify never calls
// Error on the errors it examines (some third-party errors panic there). It walks the whole wrapped tree itself, following
// Unwrap() error and Unwrap() []error (errors.Join, and the per-host errors
// inside a *pgconn.ConnectError), and honouring Is and As methods the way
// [errors.Is] and [errors.As] do. A typed nil pointer in the tree is skipped
// without calling its methods.
//
// The walk is bounded (64 levels, 1024 nodes, counting a subtree shared by
// several errors.Join calls once per path), so a pathological tree cannot
// make Classify slow; a tree that exceeds a limit is {Fatal, "too-complex"}.
// Real chains are about ten levels and a few dozen nodes.
//
// # Precedence
//
// The first matching step wins:
//
//  1. nil → {Fatal, "no-error"}.
//  2. [context.Canceled] anywhere → {Fatal, "canceled"}: the caller asked to
//     stop. This is checked before timeouts because pgconn reports a
//     canceled context as a "timeout" too.
//  3. A TLS certificate verification failure anywhere → {Fatal,
//     "tls-verification"}. This beats the network rules and every
//     [TypeRule], so a connector's dial error wrapping a bad server
//     certificate is Fatal.
//  4. A [TypeRule] of kind [Misconfiguration] anywhere (package cloudsql
//     makes the Cloud SQL connector's *errtype.ConfigError one: {Fatal,
//     "cloudsql-config"}).
//  5. All other recognised causes are collected (tables below). A wrapper,
//     such as *net.DNSError, *net.OpError or a TypeRule of kind [Wrapper],
//     is decided by the causes recognised inside it, and only falls back to
//     its own verdict when none is: the innermost, most specific error gives
//     the Reason. If any
//     collected cause is Fatal, the first Fatal one is the verdict (fail
//     safe: when pgx tried several hosts and one refused the connection while
//     another rejected the password, retrying will not help); otherwise the
//     first Transient one.
//  6. pgconn.Timeout(err) → {Transient, "timeout"}.
//  7. Anything else, including errors that carry only a message →
//     {Fatal, "unknown"}.
//
// # Network and context errors
//
//	| Error (anywhere in the tree)                 | Class     | Reason             |
//	|----------------------------------------------|-----------|--------------------|
//	| context.Canceled                             | Fatal     | canceled           |
//	| *tls.CertificateVerificationError            | Fatal     | tls-verification   |
//	| x509.UnknownAuthorityError                   | Fatal     | tls-verification   |
//	| x509.HostnameError                           | Fatal     | tls-verification   |
//	| x509.CertificateInvalidError                 | Fatal     | tls-verification   |
//	| syscall.ECONNREFUSED                         | Transient | conn-refused       |
//	| syscall.ECONNRESET                           | Transient | conn-reset         |
//	| syscall.EPIPE                                | Transient | broken-pipe        |
//	| syscall.ECONNABORTED                         | Transient | conn-aborted       |
//	| syscall.EHOSTUNREACH                         | Transient | host-unreachable   |
//	| syscall.ENETUNREACH                          | Transient | net-unreachable    |
//	| syscall.ETIMEDOUT                            | Transient | timeout            |
//	| *net.OpError dial unix, ENOENT               | Transient | socket-missing     |
//	| io.EOF, io.ErrUnexpectedEOF                  | Transient | eof                |
//	| pgconn.ErrConnClosed                         | Transient | conn-closed        |
//	| context.DeadlineExceeded                     | Transient | timeout            |
//	| os.ErrDeadlineExceeded                       | Transient | timeout            |
//	| *net.OpError whose Timeout() is true         | Transient | timeout            |
//	| pgconn.Timeout(err) (nothing else matched)   | Transient | timeout            |
//	| *net.DNSError, IsTimeout or IsTemporary      | Transient | dns-temporary      |
//	| *net.DNSError, IsNotFound                    | Fatal     | dns-not-found      |
//	| *net.DNSError, otherwise                     | Transient | dns-error          |
//	| any other errno, …                           | Fatal     | unknown            |
//
// EOF and connection resets are Transient because holdfast only retries
// connection attempts, where nothing has run on the server yet. An EOF or
// reset while a query runs is not safe to retry blindly (the statement may
// have run); do not use this package to decide query retries.
//
// pgconn.ErrConnClosed is an EOF or a reset that pgx (v5.13) reports so
// for a statement sent with the simple protocol. For a connection attempt
// it is Transient like them; for a statement whose answer was lost,
// holdfast.Factory.Classify says Fatal "outcome-unknown".
//
// A missing Unix socket (ENOENT dialing host=/cloudsql/...) is Transient,
// like a refused port: a Cloud SQL Auth Proxy sidecar or a local server
// that has not created it yet. holdfast waits for it within its startup
// and retry policies; ENOENT anywhere else stays Fatal "unknown".
//
// Timeouts are Transient: an attempt's connect_timeout says nothing of the
// next; the retry loop still stops when the caller's context is done.
//
// Being a [net.Error] is deliberately not a signal: *url.Error (every Admin
// API transport or token failure) and context.DeadlineExceeded are
// net.Errors too.
//
// A DNS name that does not exist (NXDOMAIN, IsNotFound) is Fatal: it is
// usually a typo, a deleted instance, or a blue/green "-green-" endpoint
// removed after a switchover, none of which a retry fixes, and resolvers
// cache the negative answer anyway. The renamed endpoints of an RDS
// blue/green switchover are followed by holdfast's blue/green routing, not by
// blind retries. A DNS timeout or SERVFAIL (IsTimeout, IsTemporary) is
// Transient. Add a [Rule] if your environment needs another policy.
//
// # SQLSTATE codes (*pgconn.PgError)
//
// The Reason is always "sqlstate-" followed by the code, e.g.
// "sqlstate-57P01"; [SQLState] gives the same verdict for a bare code.
//
//	| SQLSTATE                    | Name                                   | Class     |
//	|-----------------------------|----------------------------------------|-----------|
//	| 08000                       | connection_exception                   | Transient |
//	| 08001                       | sqlclient_unable_to_establish_sqlconn. | Transient |
//	| 08003                       | connection_does_not_exist              | Transient |
//	| 08004                       | sqlserver_rejected_establishment_...   | Transient |
//	| 08006                       | connection_failure                     | Transient |
//	| 08007                       | transaction_resolution_unknown         | Fatal     |
//	| 08P01                       | protocol_violation                     | Fatal     |
//	| 53000                       | insufficient_resources                 | Transient |
//	| 53200                       | out_of_memory                          | Transient |
//	| 53300                       | too_many_connections                   | Transient |
//	| 53100                       | disk_full                              | Fatal     |
//	| 53400                       | configuration_limit_exceeded           | Fatal     |
//	| 57P01                       | admin_shutdown                         | Transient |
//	| 57P02                       | crash_shutdown                         | Transient |
//	| 57P03                       | cannot_connect_now                     | Transient |
//	| 57P05                       | idle_session_timeout                   | Transient |
//	| 57014                       | query_canceled                         | Fatal     |
//	| 57P04                       | database_dropped                       | Fatal     |
//	| 28000, 28P01 (class 28)     | invalid authorization / password       | Fatal     |
//	| 3D000                       | invalid_catalog_name (no database)     | Fatal     |
//	| 42501, 42601, 42P01, … (42) | insufficient privilege, syntax, …      | Fatal     |
//	| 23505, 23503, … (class 23)  | integrity constraint violation         | Fatal     |
//	| 22012, 22P02, … (class 22)  | data exception                         | Fatal     |
//	| 0A000                       | feature_not_supported                  | Fatal     |
//	| 25006, 25P02, … (class 25)  | invalid transaction state              | Fatal     |
//	| 40001, 40P01, … (class 40)  | serialization failure, deadlock        | Fatal     |
//	| XX000                       | internal_error                         | Fatal     |
//	| any other code              |                                        | Fatal     |
//	| not 5 characters of 0-9A-Z  | (Reason "sqlstate-invalid")            | Fatal     |
//
// This package classifies connection attempts. 40001 (serialization_failure)
// and 40P01 (deadlock_detected) call for retrying the whole transaction on
// the caller's side, which only the caller can do safely, so they are Fatal
// here. 28000 is Fatal even though RDS IAM authentication reports an expired
// token with it: holdfast gives it one more attempt with a fresh token
// itself, outside this package.
//
// # Error types of other packages
//
// The built-in rules know no vendor's error types. A [TypeRule] recognises
// one node of the tree by its type ([NodeAs] finds it without unwrapping),
// and its [NodeKind] says how it ranks: a [Cause] decides for itself, a
// [Wrapper] counts only when nothing inside it is recognised, a
// [Misconfiguration] outranks every cause but cancellation and TLS
// verification. [Classifier.WithTypes] adds TypeRules to a Classifier.
// The TypeRules of packages cloudsql and alloydb cover Google's token and
// Admin API errors and their connector's, with their tables; their Rules
// add the connector's closed-dialer sentinel through [Sentinel]. Without
// them those errors are Fatal "unknown".
//
// # User rules
//
// [New] takes [Rule]s that run, in order, before the built-in rules and the
// TypeRules; the first rule that returns ok=true decides. Use them to make
// your own errors retryable or fatal, or to override a built-in row. A Rule
// sees the whole error and decides alone; a TypeRule takes part in the walk.
package classify
