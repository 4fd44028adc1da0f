package classify

// Reasons produced by the built-in rules. Reasons built from a code
// ("sqlstate-<code>", "admin-api-<code>", "token-fetch-<code>") use the
// prefixes [ReasonPrefixSQLState], [ReasonPrefixAdminAPI] and
// [ReasonPrefixTokenFetch].
const (
	ReasonNoError      = "no-error"         // err == nil (Fatal: nothing to retry)
	ReasonUnknown      = "unknown"          // no built-in rule recognised the error (Fatal)
	ReasonTooComplex   = "too-complex"      // the error tree exceeded the walk limits (Fatal)
	ReasonRule         = "rule"             // a user Rule returned an empty Reason
	ReasonCanceled     = "canceled"         // context.Canceled (Fatal)
	ReasonTLS          = "tls-verification" // TLS certificate verification failure (Fatal)
	ReasonDialerClosed = "dialer-closed"    // for a Sentinel rule on cloudsqlconn.ErrDialerClosed

	ReasonCloudSQLConfig            = "cloudsql-config"             // *errtype.ConfigError (Fatal)
	ReasonCloudSQLRefresh           = "cloudsql-refresh"            // *errtype.RefreshError, nil cause (Transient)
	ReasonCloudSQLDial              = "cloudsql-dial"               // *errtype.DialError, nil cause (Transient)
	ReasonCloudSQLResourceExhausted = "cloudsql-resource-exhausted" // *errtype.ResourceExhaustedError (Transient)

	ReasonAlloyDBConfig           = "alloydb-config"             // the AlloyDB connector's *errtype.ConfigError (Fatal)
	ReasonAlloyDBRefresh          = "alloydb-refresh"            // its *errtype.RefreshError, nil cause (Transient)
	ReasonAlloyDBDial             = "alloydb-dial"               // its *errtype.DialError, nil cause (Transient)
	ReasonAlloyDBMetadataExchange = "alloydb-metadata-exchange"  // the instance refused the connector's metadata exchange (Fatal)
	ReasonAlloyDBPermissionDenied = "alloydb-permission-denied"  // AlloyDB Admin API 401/403 (Fatal)
	ReasonAlloyDBInstanceNotFound = "alloydb-instance-not-found" // AlloyDB Admin API 404 (Fatal)

	ReasonConnRefused     = "conn-refused"     // ECONNREFUSED (Transient)
	ReasonConnReset       = "conn-reset"       // ECONNRESET (Transient)
	ReasonBrokenPipe      = "broken-pipe"      // EPIPE (Transient)
	ReasonConnAborted     = "conn-aborted"     // ECONNABORTED (Transient)
	ReasonHostUnreachable = "host-unreachable" // EHOSTUNREACH (Transient)
	ReasonNetUnreachable  = "net-unreachable"  // ENETUNREACH (Transient)
	ReasonSocketMissing   = "socket-missing"   // a Unix socket that does not exist, ENOENT on its dial (Transient)
	ReasonEOF             = "eof"              // io.EOF, io.ErrUnexpectedEOF (Transient)
	ReasonConnClosed      = "conn-closed"      // pgconn.ErrConnClosed (Transient)
	ReasonTimeout         = "timeout"          // deadlines and network timeouts (Transient)
	ReasonDNSTemporary    = "dns-temporary"    // *net.DNSError IsTimeout/IsTemporary (Transient)
	ReasonDNSNotFound     = "dns-not-found"    // *net.DNSError IsNotFound (Fatal)
	ReasonDNSError        = "dns-error"        // other *net.DNSError (Transient)

	ReasonBadRequest       = "bad-request"        // *googleapi.Error 400 (Fatal)
	ReasonPermissionDenied = "permission-denied"  // *googleapi.Error 401/403 of the Cloud SQL Admin API (Fatal)
	ReasonInstanceNotFound = "instance-not-found" // *googleapi.Error 404 of the Cloud SQL Admin API (Fatal)

	ReasonTokenInvalidGrant = "token-invalid-grant" // *oauth2.RetrieveError invalid_grant (Fatal)
	ReasonTokenDenied       = "token-denied"        // token endpoint 400/401/403 (Fatal)
	ReasonTokenError        = "token-error"         // token error without an HTTP status (Fatal)

	ReasonPrefixSQLState   = "sqlstate-"    // + SQLSTATE, e.g. "sqlstate-57P01"
	ReasonPrefixAdminAPI   = "admin-api-"   // + HTTP status, e.g. "admin-api-503"
	ReasonPrefixTokenFetch = "token-fetch-" // + HTTP status, e.g. "token-fetch-503"
)

// Reasons of holdfast's own verdicts: its factory's rules (a lost answer,
// the admission queue, a panicking password function) and its
// transaction runner (Factory.RunTx), which re-runs a whole transaction
// only when the failure proves that nothing committed.
const (
	ReasonOutcomeUnknown = "outcome-unknown"       // a statement or COMMIT that may have committed lost its answer (Fatal)
	ReasonStandbyLost    = "lost-on-standby"       // the same, on a server in hot standby: nothing committed there (Transient)
	ReasonQueued         = "connect-queued"        // a connect the pool's admission limit did not admit in time (Transient)
	ReasonPanic          = "panic"                 // the password or credentials function panicked (Fatal)
	ReasonSerialization  = "serialization-failure" // 40001 in a transaction: re-run it whole (Transient)
	ReasonDeadlock       = "deadlock"              // 40P01 in a transaction: re-run it whole (Transient)
	ReasonNotCommitted   = "not-committed"         // the connection failed before COMMIT was sent: the server rolled back (Transient)
	ReasonReadOnlyMoved  = "read-only-moved"       // 25006 from a server holdfast's routing has since left (Transient)
	ReasonDatabaseDown   = "database-down"         // a wait for a database that is down ended first (holdfast.ErrDatabaseDown: Transient)
	ReasonNotWritable    = "not-writable"          // a new connection of a pool meant for writes reached a read-only server: refused (Transient)
	ReasonFunctionError  = "function-error"        // the transaction function's own error: never re-run (Fatal)
)
