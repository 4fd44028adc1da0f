// Package classify decides whether a failed PostgreSQL connection attempt is
// worth retrying.
//
// holdfast retries new connections only when a later attempt could succeed:
// a refused or reset TCP connection, a server that is restarting or switching
// over, a Cloud SQL Admin API or IAM token endpoint answering 503. Mistakes
// (a wrong password or IAM role, a missing database or instance, a bad
// instance connection name, bad SQL, a constraint violation) are surfaced at
// once, and so is anything this package does not recognise: unknown errors
// are [Fatal].
//
// [Classify] applies the built-in rules; [New] builds a [Classifier] that
// tries user [Rule]s first. Both return a [Verdict] holding a [Class] and a
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
// Error on the errors it examines (some, such as *auth.Error without a
// Response, panic there). It walks the whole wrapped tree itself, following
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
//     "tls-verification"}. This beats the network and DialError rules, so a
//     cloudsqlconn DialError wrapping a bad server certificate is Fatal.
//  4. *errtype.ConfigError anywhere → {Fatal, "cloudsql-config"}.
//  5. All other recognised causes are collected (table below). A wrapper
//     such as *errtype.RefreshError, *errtype.DialError, *auth.Error,
//     *googleapi.Error, *net.DNSError or *net.OpError is decided by the
//     causes recognised inside it, and only falls back to its own verdict when
//     none is: the innermost, most specific error gives the Reason. If any
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
// pgconn.ErrConnClosed is the same failure as an EOF or a reset, reported
// differently: pgx (v5.13) returns it when the connection was lost during a
// statement it sends with the simple protocol (BEGIN, COMMIT, any statement
// without arguments), where the same loss during a statement with arguments
// is an EOF or a reset. It is Transient like them: a transaction that failed
// with it did not commit, unless it was its COMMIT that failed, as with an
// EOF.
//
// Timeouts are Transient because a per-attempt connect_timeout expiring says
// nothing about the next attempt. The retry loop still stops as soon as the
// caller's own context is done, so a caller's deadline is respected.
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
// token with it; mint a fresh token or add a [Rule] if you need one retry.
//
// # Google Cloud and Cloud SQL connector errors
//
//	| Error                                         | Class     | Reason                      |
//	|-----------------------------------------------|-----------|-----------------------------|
//	| *errtype.ConfigError                          | Fatal     | cloudsql-config             |
//	| *errtype.RefreshError                         | its cause | its cause's Reason          |
//	| *errtype.RefreshError, nil Err                | Transient | cloudsql-refresh            |
//	| *errtype.DialError                            | its cause | its cause's Reason          |
//	| *errtype.DialError, nil Err                   | Transient | cloudsql-dial               |
//	| *errtype.ResourceExhaustedError               | Transient | cloudsql-resource-exhausted |
//	| *googleapi.Error 408, 429, 500–599            | Transient | admin-api-<code>            |
//	| *googleapi.Error 400                          | Fatal     | bad-request                 |
//	| *googleapi.Error 401, 403                     | Fatal     | permission-denied           |
//	| *googleapi.Error 404                          | Fatal     | instance-not-found          |
//	| *googleapi.Error, other codes                 | Fatal     | admin-api-<code>            |
//	| *oauth2.RetrieveError, invalid_grant          | Fatal     | token-invalid-grant         |
//	| token error 408, 429, 500–599                 | Transient | token-fetch-<code>          |
//	| token error 400, 401, 403                     | Fatal     | token-denied                |
//	| token error, other codes                      | Fatal     | token-fetch-<code>          |
//	| token error without a Response                | Fatal     | token-error                 |
//
// "Token error" means *oauth2.RetrieveError (Response.StatusCode),
// *auth.Error (Response.StatusCode) and *metadata.Error (Code). A
// RefreshError or DialError whose cause is not recognised is Fatal "unknown".
//
// The connector's own chains (of the cloudsqlconn version in go.mod;
// cloudsql's TestConnectorVersion fails when it changes) are handled, for
// example:
//
//	fmt "failed to get instance" → *errtype.RefreshError → *googleapi.Error{503}   → Transient admin-api-503
//	fmt → *errtype.RefreshError → *auth.Error → *oauth2.RetrieveError{503}           → Transient token-fetch-503
//	fmt → *errtype.RefreshError → *url.Error → fmt → *metadata.Error{503}            → Transient token-fetch-503
//	*errtype.DialError → Join[*net.OpError → *os.SyscallError → ECONNREFUSED]        → Transient conn-refused
//	*errtype.DialError → *errtype.DialError → *tls.CertificateVerificationError      → Fatal tls-verification
//
// cloudsqlconn.ErrDialerClosed is Fatal like every unknown error, with Reason
// "unknown". To report it as "dialer-closed", and to make it win over
// transient causes joined with it, add a rule:
//
//	c := classify.New(classify.Sentinel(cloudsqlconn.ErrDialerClosed,
//		classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonDialerClosed}))
//
// This package does not import the cloudsqlconn root package: it pulls in
// about 330 packages (gRPC, OpenCensus, OpenTelemetry) and starts an
// OpenCensus goroutine at init. It imports only the small errtype, googleapi,
// auth, oauth2 and metadata packages.
//
// The connector already retries Admin API 5xx answers about five times
// (5–8.5 s) before returning them, so callers should back off generously
// after an admin-api-5xx verdict.
//
// # User rules
//
// [New] takes [Rule]s that run, in order, before the built-in rules; the first
// rule that returns ok=true decides. Use them to make your own error types
// retryable or fatal, or to override a built-in row.
package classify
