package obs

import (
	"context"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Target is the database a pool reaches, for the attributes of log lines:
// server.address, server.port, db.namespace and, when the user named the
// pool, holdfast.pool. Build it once per pool with [NewTarget]; put it in
// the context of a connect or an Acquire with [WithTarget].
type Target struct {
	attrs []slog.Attr
	kvs   []attribute.KeyValue // of metrics: pool.name, server.address, server.port, db.namespace
	key   string               // for log sampling
	host  string
	port  int
	db    string
	user  string // for hints only: never an attribute
}

// KeyPool is the log attribute of a pool's name (holdfast.PoolName, else
// "host:port/database").
const KeyPool = "holdfast.pool"

// NewTarget describes the pool built from cc, named pool ("" for none).
func NewTarget(cc *pgx.ConnConfig, pool string) *Target {
	t := &Target{
		attrs: []slog.Attr{
			slog.String(string(semconv.ServerAddressKey), cc.Host),
			slog.Int(string(semconv.ServerPortKey), int(cc.Port)),
			slog.String(string(semconv.DBNamespaceKey), cc.Database),
		},
		key:  hostPortDB(cc),
		host: cc.Host, port: int(cc.Port), db: cc.Database, user: cc.User,
		kvs: targetKVs(cc, PoolName(cc, pool)),
	}
	if pool != "" {
		t.attrs = append(t.attrs, slog.String(KeyPool, pool))
		t.key = pool + "@" + t.key
	}
	return t
}

// targetKVs are the attributes of a pool's holdfast.* metrics: bounded by
// the pools of the process, never per connection.
func targetKVs(cc *pgx.ConnConfig, name string) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.DBClientConnectionPoolName(name),
		semconv.ServerAddress(cc.Host),
		semconv.ServerPort(int(cc.Port)),
		semconv.DBNamespace(cc.Database),
	}
}

// metricAttrs returns kvs followed by the target's attributes in ctx.
func metricAttrs(ctx context.Context, kvs ...attribute.KeyValue) []attribute.KeyValue {
	if tg := targetOf(ctx); tg != nil {
		return append(kvs, tg.kvs...)
	}
	return kvs
}

// PoolName is a pool's name in telemetry (db.client.connection.pool.name):
// name when the user gave one, else "host:port/database" of cc, as the
// semantic conventions advise for a pool without a name of its own.
func PoolName(cc *pgx.ConnConfig, name string) string {
	if name != "" {
		return name
	}
	return hostPortDB(cc)
}

// hostPortDB is "host:port/database" of cc.
func hostPortDB(cc *pgx.ConnConfig) string {
	return net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))) + "/" + cc.Database
}

type targetKey struct{}

// WithTarget returns ctx carrying t.
func WithTarget(ctx context.Context, t *Target) context.Context {
	if t == nil {
		return ctx
	}
	return context.WithValue(ctx, targetKey{}, t)
}

func targetOf(ctx context.Context) *Target {
	t, _ := ctx.Value(targetKey{}).(*Target)
	return t
}

// TargetOf returns the target [WithTarget] put in ctx, or nil: for a
// hint that names it.
func TargetOf(ctx context.Context) *Target { return targetOf(ctx) }

// logEvery is how often a log line of one kind (message, target, layer,
// reason) is written at most; the lines in between are counted and the
// next line says how many were suppressed.
const logEvery = time.Second

// sampler limits repeated log lines. A zero sampler is ready to use.
type sampler struct {
	mu    sync.Mutex
	every time.Duration
	now   func() time.Time
	last  map[string]*sampleState
}

type sampleState struct {
	at         time.Time
	suppressed int
}

// allow reports whether a line of kind key may be written now, and how many
// lines of that kind were suppressed since the last one written.
func (s *sampler) allow(key string) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	every := s.every
	if every == 0 {
		every = logEvery
	}
	if s.last == nil {
		s.last = map[string]*sampleState{}
	}
	st, ok := s.last[key]
	if !ok {
		if len(s.last) >= maxSampleKeys {
			clear(s.last) // a bound on memory; the worst case is a few extra lines
		}
		s.last[key] = &sampleState{at: now}
		return true, 0
	}
	if now.Sub(st.at) < every {
		st.suppressed++
		return false, 0
	}
	n := st.suppressed
	st.at, st.suppressed = now, 0
	return true, n
}

// maxSampleKeys bounds the sampler's memory.
const maxSampleKeys = 4096

// log writes a sampled line: its attributes, the target's from ctx, and
// "suppressed" when lines of its kind (message, layer, stage, reason,
// target) were dropped since the last one.
func (t *Telemetry) log(ctx context.Context, level slog.Level, msg, layer, reason string, attrs ...slog.Attr) {
	if !t.logger.Enabled(ctx, level) {
		return
	}
	tg := targetOf(ctx)
	key := msg + "|" + layer + "|" + StageOf(ctx, layer) + "|" + reason
	if tg != nil {
		key += "|" + tg.key
		attrs = append(attrs, tg.attrs...)
	}
	ok, suppressed := t.sampler.allow(key)
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed))
	}
	t.logger.LogAttrs(ctx, level, msg, attrs...)
}

// Version is the version of the holdfast module, from the binary's build
// information, for the instrumentation scope; "(devel)" when holdfast is
// the main module or the information is missing.
var Version = moduleVersion()

func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	for _, d := range bi.Deps {
		if d.Path == ScopeName {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	if bi.Main.Path == ScopeName && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// Hint says what to check about a failure of reason (a classified reason:
// "sqlstate-42501", "token-fetch-403", …) on target t (nil: unknown), for
// the person on call, in the words of their configuration: the
// connection string's keywords (host, port, dbname, user, password,
// sslmode) and holdfast's option names (WithPasswordFunc,
// WithStartupPolicy); "" when there is nothing more to say than the
// error.
func Hint(reason string, t *Target) string {
	db, user, host := "the database", "the role", "the server"
	socket := "the Unix socket"
	if t != nil {
		db, user, host = quoteIdent(t.db), quoteIdent(t.user), net.JoinHostPort(t.host, strconv.Itoa(t.port))
		if strings.HasPrefix(t.host, "/") {
			host = t.host
			socket = strings.TrimSuffix(t.host, "/") + "/.s.PGSQL." + strconv.Itoa(t.port)
		}
	}
	switch reason {
	case "sqlstate-42501":
		return "permission denied for database: GRANT CONNECT ON DATABASE " + db + " TO " + user + " (or to PUBLIC)"
	case "sqlstate-28P01":
		return "password authentication failed for " + user + ": check the password the pool uses (WithPasswordFunc's, or password in the connection string) against the server's, and that a rotation finished"
	case "sqlstate-28000":
		return "the server refused " + user + ": check user in the connection string, the server's pg_hba.conf, or with IAM that the role has rds_iam (a Cloud SQL IAM user) and the token is issued for " + host + " and this user"
	case "sqlstate-3D000":
		return "no database " + db + " on " + host + ": check dbname in the connection string"
	case "sqlstate-53300":
		return "too many connections (max_connections, or the role's CONNECTION LIMIT): check pg_stat_activity and the pools' MaxConns"
	case "sqlstate-57P03":
		return "the server is starting up, shutting down or in recovery"
	case "sqlstate-08P01":
		return "protocol violation: check that " + host + " is a PostgreSQL server (not a proxy's admin port) and sslmode in the connection string"
	case "conn-refused":
		return "nothing accepts connections at " + host + ": the server (or its proxy) is down or restarting, or host and port in the connection string are wrong"
	case "socket-missing":
		return "no Unix socket at " + socket + ": the server, or a Cloud SQL Auth Proxy sidecar in unix-socket mode, is not listening there (yet); check host (the socket directory) and port in the connection string, that the proxy runs with --unix-socket on that directory, and WithStartupPolicy if it starts after this service"
	case "outcome-unknown":
		return ""
	case "panic":
		return "the password function panicked: see its stack in the ERROR line before this one"
	case "permission-denied":
		return "the Cloud SQL Admin API refused the identity: it needs roles/cloudsql.client (and roles/cloudsql.instanceUser for IAM login)"
	case "instance-not-found":
		return "the Cloud SQL instance was not found: check the instance connection name (project:region:instance)"
	case "alloydb-permission-denied":
		return "the AlloyDB Admin API refused the identity: it needs roles/alloydb.client and roles/serviceusage.serviceUsageConsumer (and roles/alloydb.databaseUser for IAM database authentication)"
	case "alloydb-instance-not-found":
		return "the AlloyDB instance was not found: check the instance URI (projects/PROJECT/locations/REGION/clusters/CLUSTER/instances/INSTANCE) given to alloydb.With, or host in the connection string when it is one"
	case "alloydb-metadata-exchange":
		return "the AlloyDB instance refused the connection in the connector's metadata exchange (its reason is in the error): check that the identity has roles/alloydb.client, and with IAM database authentication (alloydbconn.WithIAMAuthN) that it has roles/alloydb.databaseUser and that user in the connection string is that IAM principal (a service account's email without .gserviceaccount.com)"
	case "dns-not-found":
		return "the host name does not resolve: check host in the connection string (" + host + ")"
	case ReasonAuthFreshToken:
		return "authentication failed: one retry with a freshly fetched password"
	}
	switch {
	case strings.HasPrefix(reason, "token-"):
		return "a token fetch failed (WithPasswordFunc's, or the connector's credentials with cloudsql.With or alloydb.With): check the credentials and permissions of the identity it runs as"
	case strings.HasPrefix(reason, "aws-credentials"), strings.HasPrefix(reason, "password"):
		return "the password function failed: check the credentials and permissions of the identity it runs as"
	case strings.HasPrefix(reason, "tls") || strings.Contains(reason, "certificate"):
		return "TLS failed: check sslmode in the connection string, the server's certificate and its name (" + host + ")"
	case reason == "config" || strings.HasSuffix(reason, "-config"):
		return "a configuration error: fix the option or the connection string keyword named in the error"
	}
	return ""
}

// quoteIdent quotes a PostgreSQL identifier for a hint.
func quoteIdent(s string) string {
	if s == "" {
		return `""`
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// Logger returns l with t's attributes on every line (l unchanged for a
// nil l or t): the logger of a layer that serves one pool.
func (t *Target) Logger(l *slog.Logger) *slog.Logger {
	if l == nil || t == nil {
		return l
	}
	args := make([]any, len(t.attrs))
	for i, a := range t.attrs {
		args[i] = a
	}
	return l.With(args...)
}
