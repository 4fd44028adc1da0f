package readiness

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/internal/outage"
	"github.com/holdfast-db/holdfast/sqldb"
)

// Target is one database a [Checker] checks, opens at startup and drains:
// a pgxpool, or a *sql.DB of package sqldb. Build one with [Pool] or [DB],
// or as a literal; a Target is plain data.
//
// A database is its pool: targets given to [New] over one pool — a
// pgxpool and a *sql.DB over it (sqldb.OpenDB(pool)), or one target given
// twice — are one target, as if given as Target{Pool: pool, DB: db}: one
// check (through database/sql when there is a DB, which takes its
// connection from the pool), one startup gate, one entry in the status
// and the JSON body, at the place of the first. Their Name (where given),
// Optional and Factory must agree, and there is at most one *sql.DB per
// pool: New returns a [*ConfigError] naming the later target otherwise.
type Target struct {
	// Name names the target's checks in the admin body ("componentId"),
	// the drain's answers, log lines (holdfast.readiness.check) and
	// metrics (holdfast.readiness.check); the probe never serves it.
	// Never put an address in it. Default: the name the pool
	// was given (the holdfast.PoolName option), else "database", and
	// "database-2", "database-3", ...
	// for the second and later targets without one, so that the body
	// names no host, port or IP. (The address of a target is in its log
	// lines: server.address, server.port, db.namespace.) Two targets over
	// different pools must not share a name; targets over one pool are one
	// target, named by the Name given to any of them. At most 128
	// printable bytes.
	Name string

	// Pool is the pgxpool of the target. With DB, it is the pool under DB,
	// needed only when sqldb.PoolOf(DB) is nil (a *sql.DB of sql.OpenDB
	// over a sqldb.Connector: Connector.Pool); it must be DB's pool.
	Pool *pgxpool.Pool

	// DB is a database/sql target: a *sql.DB whose connections come from a
	// pgxpool, one of sqldb.Open or sqldb.OpenDB. Its check runs through
	// database/sql (DB.ExecContext), so that it sees what the
	// application's database/sql code sees; its drain and its startup go
	// through its pool.
	DB *sql.DB

	// Optional makes the target not required: when its checks fail (or
	// its startup has not succeeded), readiness answers 200 with status
	// "warn" instead of 503, and its own check in the JSON says "fail".
	// For a database the service can do without for a while, such as a
	// reporting replica. Default false: required.
	Optional bool

	// Factory makes the target's first connection in [Checker.Start]
	// (under its startup retry policy) and classifies its failures. Nil
	// means Config.Factory. Give each target the factory that configured
	// its pool when they differ.
	Factory *holdfast.Factory
}

// Pool returns the Target of a pgxpool, named by default.
func Pool(pool *pgxpool.Pool) Target { return Target{Pool: pool} }

// DB returns the Target of a *sql.DB of sqldb.Open or sqldb.OpenDB, named
// by default after its pool. Given beside Pool(pool) for the pool under
// it, the two are one target (see [Target]).
func DB(db *sql.DB) Target { return Target{DB: db} }

// TargetInUse is one target's acquired connections at a drain poll.
type TargetInUse struct {
	Name          string
	AcquiredConns int64
}

// Kinds of a target, in [TargetStatus].Kind.
const (
	kindPool = "pgxpool"
	kindDB   = "database/sql"
)

// defaultName is the name of a target whose pool was given no name; the
// second and later are defaultName-2, defaultName-3, ...
const defaultName = "database"

// target is a Target with its defaults and its state.
type target struct {
	name       string
	kind       string
	pool       *pgxpool.Pool
	db         *sql.DB
	optional   bool
	factory    *holdfast.Factory
	ownFactory bool                // Target.Factory was given
	poolName   string              // its pool's holdfast name (maybe "host:port/database"), for logs and metrics
	attrs      []slog.Attr         // of its log lines
	rtel       *obs.Readiness      // of the factory that configured its pool; nil records nothing
	otel       *obs.Telemetry      // of the factory that configured its pool, for its redactor; nil: none
	secrets    obs.Redactor        // the pool config's own password, pinned: no ring pushes it out
	tel        *obs.ReadinessCheck // its series; nil records nothing
	index      int                 // of the first Target given over its pool, for errors
	given      string              // the Name given, "" for none
	st         targetState         // guarded by Checker.mu
}

// targetState is what a Checker knows of one target; guarded by its mu.
type targetState struct {
	gate     gate
	started  time.Time        // when the gate opened, or Start last failed
	startV   classify.Verdict // cause of the last failed Start
	startErr error
	db       dbState
	// last health and reason recorded in the target's series
	lastHealth Health
	lastReason string
}

// newTargets checks targets and fills in their defaults. Targets over one
// pool are one target (see [New]): the later ones are merged into the
// first.
func newTargets(cfg Config, targets []Target) ([]*target, error) {
	if len(targets) == 0 {
		return nil, &ConfigError{Pkg: "readiness", Field: "targets", Why: "none given: pass at least one Target (readiness.Pool(pool), readiness.DB(db))"}
	}
	out := make([]*target, 0, len(targets))
	byPool := map[*pgxpool.Pool]*target{}
	for i, tg := range targets {
		field := "targets[" + strconv.Itoa(i) + "]"
		pool, err := poolOf(tg, field)
		if err != nil {
			return nil, err
		}
		if tg.Name != "" {
			if err := checkName(tg.Name); err != nil {
				return nil, &ConfigError{Pkg: "readiness", Field: field + ".Name", Why: err.Error()}
			}
		}
		if t := byPool[pool]; t != nil {
			if err := t.merge(tg, field); err != nil {
				return nil, err
			}
			continue
		}
		t := &target{index: i, db: tg.DB, pool: pool, optional: tg.Optional, factory: tg.Factory, ownFactory: tg.Factory != nil, kind: kindPool, given: tg.Name}
		if t.db != nil {
			t.kind = kindDB
		}
		if t.factory == nil {
			t.factory = cfg.Factory
		}
		t.poolName = obs.PoolName(t.pool.Config().ConnConfig, "")
		if b := conn.OfPool(t.pool); b != nil {
			t.poolName = b.Name()
			if b.Named() {
				t.name = t.poolName
			}
			t.otel = b.Telemetry()
			t.rtel = t.otel.Readiness()
		}
		byPool[pool] = t
		out = append(out, t)
	}
	for _, t := range out {
		if t.given != "" {
			t.name = t.given
		}
	}
	if err := nameTargets(out); err != nil {
		return nil, err
	}
	for _, t := range out {
		cc := t.pool.Config().ConnConfig
		t.secrets.Add(cc.Password)
		t.attrs = []slog.Attr{
			slog.String(string(obs.KeyReadyCheck), t.name),
			slog.String(obs.KeyPool, t.poolName),
			slog.String(string(semconv.ServerAddressKey), cc.Host),
			slog.Int(string(semconv.ServerPortKey), int(cc.Port)),
			slog.String(string(semconv.DBNamespaceKey), cc.Database),
		}
		t.tel = t.rtel.Check(obs.CheckTarget{
			Check: t.name, Pool: t.poolName, Host: cc.Host, Port: int(cc.Port), Database: cc.Database})
	}
	return out, nil
}

// poolOf returns the pool of tg: Pool, or the pool under DB.
func poolOf(tg Target, field string) (*pgxpool.Pool, error) {
	switch {
	case tg.DB == nil && tg.Pool == nil:
		return nil, &ConfigError{Pkg: "readiness", Field: field, Why: "neither Pool nor DB is set"}
	case tg.DB == nil:
		return tg.Pool, nil
	}
	under := sqldb.PoolOf(tg.DB)
	switch {
	case under == nil && tg.Pool == nil:
		return nil, &ConfigError{Pkg: "readiness", Field: field + ".DB", Why: "its pool is unknown (not a *sql.DB of sqldb.Open or sqldb.OpenDB, or closed): set Target.Pool to the pool under it"}
	case under != nil && tg.Pool != nil && under != tg.Pool:
		return nil, &ConfigError{Pkg: "readiness", Field: field + ".Pool", Why: "is not the pool under DB (sqldb.PoolOf)"}
	case under != nil:
		return under, nil
	}
	return tg.Pool, nil
}

// merge makes tg, a later target over t's pool, part of t: its DB, its
// Name, Optional and Factory, which must not contradict t's. field names
// tg in errors.
func (t *target) merge(tg Target, field string) error {
	first := "targets[" + strconv.Itoa(t.index) + "]"
	conflict := func(f, why string) error {
		return &ConfigError{Pkg: "readiness", Field: field + "." + f,
			Why: why + ": " + field + " and " + first + " reach one pool, so they are one database, checked and reported once; give it once, or make them agree"}
	}
	switch {
	case tg.DB != nil && t.db != nil && tg.DB != t.db:
		return conflict("DB", "a second *sql.DB over the pool of "+first)
	case tg.Name != "" && t.given != "" && tg.Name != t.given:
		return conflict("Name", fmt.Sprintf("%q, but %s is named %q", tg.Name, first, t.given))
	case tg.Optional != t.optional:
		return conflict("Optional", fmt.Sprintf("%t, but %t for %s", tg.Optional, t.optional, first))
	case tg.Factory != nil && t.ownFactory && tg.Factory != t.factory:
		return conflict("Factory", "another factory than "+first+"'s")
	}
	if tg.DB != nil {
		t.db, t.kind = tg.DB, kindDB
	}
	if tg.Name != "" {
		t.given = tg.Name
	}
	if tg.Factory != nil {
		t.factory, t.ownFactory = tg.Factory, true
	}
	return nil
}

// nameTargets rejects two targets (two pools) of one name, and names the
// targets without one: "database", then "database-2", "database-3", ..., skipping
// the names of the others.
func nameTargets(ts []*target) error {
	names := map[string]int{}
	for _, t := range ts {
		if t.name == "" {
			continue
		}
		if j, dup := names[t.name]; dup {
			return &ConfigError{Pkg: "readiness", Field: "targets[" + strconv.Itoa(t.index) + "].Name",
				Why: fmt.Sprintf("%q is also the name of targets[%d], another database: give one of them a Name of its own", t.name, j)}
		}
		names[t.name] = t.index
	}
	n := 1
	for _, t := range ts {
		for t.name == "" {
			name := defaultName
			if n > 1 {
				name += "-" + strconv.Itoa(n)
			}
			n++
			if _, taken := names[name]; !taken {
				t.name, names[name] = name, t.index
			}
		}
	}
	return nil
}

// checkName rejects an empty, overlong or unprintable name.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("must not be empty")
	case len(name) > maxOwner:
		return fmt.Errorf("longer than 128 bytes")
	case !utf8.ValidString(name):
		return fmt.Errorf("not valid UTF-8")
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("contains an unprintable character")
		}
	}
	return nil
}

// start makes the target's first connection under its factory's startup
// policy: through its pool, also for a *sql.DB (the pool under it).
func (t *target) start(ctx context.Context) error {
	return t.factory.Start(ctx, t.pool)
}

// checkSQL is the query of the database check: one simple-protocol round
// trip.
const checkSQL = "SELECT 1"

// check runs one database check of the target: for a pgxpool it acquires a
// connection through the pool (never a new connection of its own, so it
// sees pool exhaustion) and runs one query on it; for a *sql.DB it runs the
// query through database/sql, as the application's code does.
func (t *target) check(ctx context.Context) error {
	if p := conn.OfPool(t.pool); p != nil && p.Outage() != nil && p.Outage().Sleeps() {
		// holdfast.WithServerlessV2: a check would keep the pool's
		// connection, and the instance, awake; the outage layer's state
		// (waking, database-down) stands for the database.
		return nil
	}
	if t.db != nil {
		_, err := t.db.ExecContext(ctx, checkSQL)
		return err
	}
	conn, err := t.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	_, err = conn.Exec(ctx, checkSQL)
	return err
}

// blueGreen returns the target pool's blue/green router (WithBlueGreen),
// or nil, found from the pool's config: the checker's factory's, or
// another's.
func (t *target) blueGreen() bluegreen.Router {
	if r := t.factory.BlueGreen(t.pool); r != nil {
		return r
	}
	if p := conn.OfPool(t.pool); p != nil {
		return p.BlueGreen() // another factory's
	}
	return nil
}

// outage returns the outage state of the target's pool (holdfast's
// WithOutage), found from its config: up when it has no outage layer.
func (t *target) outage() outage.State {
	if p := conn.OfPool(t.pool); p != nil {
		if o := p.Outage(); o != nil {
			return o.State()
		}
	}
	return outage.State{}
}

// logAttrs returns the target's attributes followed by attrs.
func (t *target) logAttrs(attrs ...slog.Attr) []slog.Attr {
	return append(append(make([]slog.Attr, 0, len(t.attrs)+len(attrs)), t.attrs...), attrs...)
}

// redact returns s without the secrets of the factory that configured the
// target's pool (obs.Telemetry.Redact: its passwords and tokens, and any
// connection-string password) and without the pool config's own password,
// which the target keeps apart: a factory's redactor remembers a bounded
// number of secrets, and a password function that mints a token per
// connection pushes the oldest out.
func (t *target) redact(s string) string {
	return t.secrets.Redact(t.otel.Redact(s))
}
