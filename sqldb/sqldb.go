package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	hfconn "github.com/holdfast-db/holdfast/internal/conn"
)

// ErrInvalidConfig is [holdfast.ErrInvalidConfig], matched by every
// *ConfigError.
var ErrInvalidConfig = holdfast.ErrInvalidConfig

// ConfigError is [holdfast.ConfigError], the one configuration error of
// every holdfast package, under this package's name: its errors read
// "sqldb: invalid <Field>: <Why>" (Pkg "sqldb"), and one
// errors.As with either name finds them and any other package's. It is
// not retryable: fix the configuration.
type ConfigError = holdfast.ConfigError

// ErrClosed is returned by [Connector.Connect] after [Connector.Close].
// database/sql checks first that its *sql.DB is open, so code that uses a
// *sql.DB sees database/sql's own error ("sql: database is closed").
var ErrClosed = errors.New("sqldb: connector is closed")

// Open builds a pool for cfg with f.NewPool (which configures cfg and makes
// the first connection under the factory's startup policy) and returns a
// *sql.DB over it. Closing the *sql.DB closes the pool, at once or, when
// the application still holds a connection (a Rows, Tx or *sql.Conn),
// when it releases the last one; DB.Close does not wait. It returns a
// *ConfigError for a nil factory or config and NewPool's errors (a
// *holdfast.ConnectError of Layer "startup" when the database cannot be
// reached).
//
// The *sql.DB keeps no idle connection (SetMaxIdleConns(0), as pgx's
// stdlib.OpenDBFromPool sets): a connection the application is done with
// goes back to the pool at once. See the package documentation, "Idle
// connections".
//
// opts are pgx stdlib options. stdlib.OptionShouldPing applies (when
// database/sql reuses a connection); stdlib.OptionResetSession is replaced
// by sqldb's check of a reused connection, which runs the pool's
// PrepareConn: reset a session there. In *sql.Conn.Raw the driver
// connection is pgx's *stdlib.Conn. pgx's stdlib ignores
// OptionBeforeConnect and OptionAfterConnect for a pool: set the pool's
// hooks on cfg instead (BeforeConnect, AfterConnect, PrepareConn,
// AfterRelease, ShouldPing).
func Open(ctx context.Context, f *holdfast.Factory, cfg *pgxpool.Config, opts ...stdlib.OptionOpenDB) (*sql.DB, error) {
	switch {
	case f == nil:
		return nil, &ConfigError{Pkg: "sqldb", Field: "factory", Why: "nil: build one with holdfast.New"}
	case cfg == nil:
		return nil, &ConfigError{Pkg: "sqldb", Field: "cfg", Why: "nil: build it with pgxpool.ParseConfig"}
	}
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return open(newConnector(pool, true, f, opts)), nil
}

// OpenDB returns a *sql.DB over pool, a pool built from a config that a
// holdfast.Factory configured (NewPool, NewPoolFromDSN, or Configure then
// pgxpool.NewWithConfig), set up as [Open]'s, with the same protection:
// no idle connection in database/sql, the same options, and a failed
// acquire retried as the factory's Acquire retries one (the factory is
// found from the pool's config). It is the way to use one pool from both
// pgx and database/sql code: one set of connections, one MaxConns.
// Closing the *sql.DB leaves the pool open.
func OpenDB(pool *pgxpool.Pool, opts ...stdlib.OptionOpenDB) *sql.DB {
	return open(newConnector(pool, false, nil, opts))
}

func open(c *Connector) *sql.DB {
	db := sql.OpenDB(c)
	db.SetMaxIdleConns(0) // the pool keeps the idle connections, as stdlib.OpenDBFromPool has it
	c.mu.Lock()
	c.db = db
	c.mu.Unlock()
	pools.Store(db, c.pool)
	return db
}

// pools maps every open *sql.DB of [Open] and [OpenDB] to its pool, for
// [PoolOf]. The DB's Connector removes its entry when it is closed
// (database/sql calls Connector.Close from DB.Close), so a closed DB is not
// kept alive by it.
var pools sync.Map // *sql.DB → *pgxpool.Pool

// PoolOf returns the pgxpool under db, a *sql.DB that [Open] or [OpenDB]
// returned and that is not closed yet, so that code given only the *sql.DB
// (readiness checks, metrics, a drain) can read the pool's Stat or reach
// its holdfast name. It returns nil for a nil
// or closed db and for a *sql.DB that sqldb did not build itself: one of
// sql.Open with a [RegisterDriver] driver, or of sql.OpenDB over a
// [Connector] (use [Connector.Pool]). The pool stays the *sql.DB's: do not
// close it, close the DB.
func PoolOf(db *sql.DB) *pgxpool.Pool {
	if db == nil {
		return nil
	}
	p, _ := pools.Load(db)
	pool, _ := p.(*pgxpool.Pool)
	return pool
}

// Connector is a driver.Connector whose connections are acquired from a
// holdfast-configured pool; it owns the pool (Close closes it). Build one
// with [NewConnector]; sql.OpenDB(c) calls its Close on DB.Close.
//
// Its connections are pgx's own: Connect returns the *stdlib.Conn of pgx's
// stdlib.GetPoolConnector, so that in *sql.Conn.Raw
// driverConn.(*stdlib.Conn).Conn() is the *pgx.Conn, as with pgx's driver.
//
// A *sql.DB of sql.OpenDB(c) keeps database/sql's defaults: up to 2 idle
// connections (SetMaxIdleConns), which stay acquired from the pool while
// database/sql keeps them; each is checked as the pool checks an Acquire
// when database/sql reuses it (see the package documentation, "Idle
// connections"). Call db.SetMaxIdleConns(0), as [OpenDB] does, to have
// every connection go back to the pool when the application is done with
// it (and a readiness drain of the pool not wait for idle ones).
type Connector struct {
	base  driver.Connector
	pool  *pgxpool.Pool
	owned bool              // Close closes pool
	f     *holdfast.Factory // Open's and RegisterDriver's: closing the pool stops its monitors (Factory.ClosePool)
	// The pool's checks of an Acquire, which reuse runs too.
	prepare  func(context.Context, *pgx.Conn) (bool, error)
	lifetime time.Duration

	mu         sync.Mutex
	connecting int     // Connect calls under way
	closing    bool    // Close was called: Connect returns ErrClosed
	db         *sql.DB // the *sql.DB of Open or OpenDB over it, registered for PoolOf; else nil
}

// Pool returns the pool the Connector acquires its connections from.
func (c *Connector) Pool() *pgxpool.Pool { return c.pool }

// NewConnector returns a Connector over pool that closes pool when closed.
// opts are pgx stdlib options, as for [Open].
func NewConnector(pool *pgxpool.Pool, opts ...stdlib.OptionOpenDB) *Connector {
	return newConnector(pool, true, nil, opts)
}

func newConnector(pool *pgxpool.Pool, owned bool, f *holdfast.Factory, opts []stdlib.OptionOpenDB) *Connector {
	cfg := pool.Config()
	c := &Connector{pool: pool, owned: owned, f: f, prepare: cfg.PrepareConn, lifetime: cfg.MaxConnLifetime}
	//lint:ignore SA1019 pgxpool runs the deprecated BeforeAcquire when PrepareConn is not set; so does a reuse
	if before := cfg.BeforeAcquire; c.prepare == nil && before != nil {
		c.prepare = func(ctx context.Context, conn *pgx.Conn) (bool, error) { return before(ctx, conn), nil }
	}
	// sqldb's check comes last: it replaces an OptionResetSession of opts.
	c.base = stdlib.GetPoolConnector(pool, append(slices.Clip(opts), stdlib.OptionResetSession(c.reuse))...)
	return c
}

// Connect acquires a connection from the pool, bounded by ctx, and returns
// it as pgx's *stdlib.Conn. Every connect of the pool is retried by the
// factory that configured it, and a failed acquire is retried as
// holdfast.Factory.Acquire retries one: one retry of a 28P01 with a
// freshly fetched password or token, which pgx does not retry inside a
// connect. The factory is found from the pool's config, whichever of
// [Open], [OpenDB], [NewConnector] or [RegisterDriver] built the
// Connector; over a pool no factory configured, Connect is pgx's. After
// Close it returns [ErrClosed].
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.connecting++ // a Close meanwhile leaves the pool to the release of this connection
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.connecting--
		c.mu.Unlock()
	}()
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	if sc, ok := conn.(*stdlib.Conn); ok && c.lifetime > 0 {
		if data := sc.Conn().PgConn().CustomData(); data[firstAcquired] == nil {
			data[firstAcquired] = time.Now()
		}
	}
	return conn, nil
}

func (c *Connector) connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err == nil {
		return conn, nil
	}
	p := hfconn.OfPool(c.pool) // the factory that configured the pool, found from its config
	if p == nil {
		return nil, err
	}
	err = p.Engine().Reacquire(ctx, c.pool, err, func(ctx context.Context) error {
		var err error
		conn, err = c.base.Connect(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return conn, nil
}

// reuse is the ResetSession of the Connector's connections: pgx's stdlib
// calls it when database/sql reuses a connection it kept, after its own
// checks (the connection is open, in no transaction, and answered a ping
// if it was idle over a second or OptionShouldPing says so). It checks
// the connection as pgxpool's Acquire does: a connection older than the
// pool's MaxConnLifetime (counted from sqldb's first acquire of it) is
// destroyed, and the pool's PrepareConn runs, so that holdfast's eviction
// (a failed server, a failover, a reader to retire, the old blue
// instance) and the application's own PrepareConn see every reuse. A
// connection destroyed is closed, so that its release destroys it in the
// pool, and database/sql takes another (driver.ErrBadConn). When
// PrepareConn fails, the connection goes back to the pool and database/sql
// takes another (an error that is driver.ErrBadConn and wraps
// PrepareConn's): if the pool's Acquire fails so too, the operation fails
// with PrepareConn's error, as on a pgxpool.
func (c *Connector) reuse(ctx context.Context, conn *pgx.Conn) error {
	keep, err := true, error(nil)
	if c.lifetime > 0 {
		if at, ok := conn.PgConn().CustomData()[firstAcquired].(time.Time); ok && time.Since(at) > c.lifetime {
			keep = false
		}
	}
	if keep && c.prepare != nil {
		keep, err = c.prepare(ctx, conn)
	}
	if !keep {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		_ = conn.Close(cctx)
		cancel()
	}
	switch {
	case err != nil:
		return &reuseError{err: err}
	case !keep:
		return driver.ErrBadConn
	}
	return nil
}

// firstAcquired is the key, in a connection's pgconn.CustomData, of when
// a Connector first acquired it: the connection is at least that old.
const firstAcquired = "github.com/holdfast-db/holdfast/sqldb.firstAcquired"

// closeTimeout bounds the close of a connection the pool's PrepareConn
// rejected on reuse (a Terminate, then the socket closes).
const closeTimeout = 100 * time.Millisecond

// reuseError is the pool's PrepareConn's error on a reuse: database/sql
// gives the connection back and takes another (it is driver.ErrBadConn).
type reuseError struct{ err error }

func (e *reuseError) Error() string {
	return "sqldb: the pool's PrepareConn failed on a connection database/sql reused: " + e.err.Error()
}
func (e *reuseError) Unwrap() []error { return []error{e.err, driver.ErrBadConn} }

// closePool closes the pool the Connector owns, and with a factory the
// monitors the factory runs for it (Factory.ClosePool).
func (c *Connector) closePool() {
	if c.f != nil {
		c.f.ClosePool(c.pool)
		return
	}
	c.pool.Close()
}

// Driver returns pgx's stdlib driver.
func (c *Connector) Driver() driver.Driver { return c.base.Driver() }

// Close closes the pool the Connector owns; database/sql calls it from
// DB.Close, after closing its idle connections. It never waits for a
// connection the application still holds (a Rows, a Tx or a *sql.Conn,
// which DB.Close leaves open as database/sql does): with none, it closes
// the pool before it returns; else it closes the pool's idle connections
// at once and leaves the close of the pool to a goroutine of the
// Connector's, which pgxpool.Close (and with a factory, Factory.ClosePool)
// keeps until the application releases the last connection it holds, and
// which ends then. Once that goroutine has begun pgxpool.Close, the pool
// acquires nothing more and its health check is stopped; a connection
// released is closed. Connect returns [ErrClosed] from Close on, and
// [PoolOf] of its *sql.DB returns nil. Closing a Connector a second time
// does nothing.
func (c *Connector) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil
	}
	c.closing = true
	if c.db != nil {
		pools.Delete(c.db) // PoolOf(db) is nil from now on
		c.db = nil
	}
	connecting := c.connecting > 0
	c.mu.Unlock()
	if !c.owned {
		return nil
	}
	// No Connect can start now: with none under way and nothing acquired,
	// pgxpool.Close does not wait.
	if !connecting && c.pool.Stat().AcquiredConns() == 0 {
		c.closePool()
		return nil
	}
	c.pool.Reset() // the idle connections, now
	go c.closeWhenReleased()
	return nil
}

// closeWhenReleased is the goroutine that Close starts while connections
// are held; the Connector owns it, and nothing waits for it. It returns
// when pgxpool.Close does: once the application has released the last of
// them and the pool has closed it (and with a factory, once
// Factory.ClosePool has stopped the pool's monitors).
func (c *Connector) closeWhenReleased() { c.closePool() }

// RegisterDriver registers name as a database/sql driver whose data source
// names are pgx connection strings (URLs or key=value), for tools that open
// a database by driver name and DSN only. Each sql.Open(name, dsn) builds
// its own pool configured by f, without connecting (connections are made
// on first use, retried as usual); DB.Close closes it.
//
// sqldb cannot set that *sql.DB's SetMaxIdleConns: database/sql keeps its
// default of 2 idle connections, acquired from the pool and checked when
// reused (see the package documentation, "Idle connections"). Call
// db.SetMaxIdleConns(0) to have them go back to the pool, as [Open]'s do.
//
// It returns a *ConfigError when name is empty, already registered, or f
// is nil. Register once, at program start (database/sql cannot unregister
// a driver).
func RegisterDriver(name string, f *holdfast.Factory) error {
	switch {
	case name == "":
		return &ConfigError{Pkg: "sqldb", Field: "name", Why: "empty"}
	case f == nil:
		return &ConfigError{Pkg: "sqldb", Field: "factory", Why: "nil: build one with holdfast.New"}
	case slices.Contains(sql.Drivers(), name):
		return &ConfigError{Pkg: "sqldb", Field: "name", Why: fmt.Sprintf("a driver named %q is already registered", name)}
	}
	sql.Register(name, &Driver{f: f})
	return nil
}

// Driver is the database/sql driver of [RegisterDriver]. database/sql
// uses its OpenConnector; Open, for code that calls the driver directly,
// opens a connection from a pool built for the DSN on first use and kept
// for the life of the program.
type Driver struct {
	f *holdfast.Factory

	mu    sync.Mutex
	pools map[string]*Connector // Open's pools, by DSN
}

// OpenConnector parses dsn and returns a Connector over a new pool
// configured by the driver's factory. No connection is made yet.
func (d *Driver) OpenConnector(dsn string) (driver.Connector, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, &ConfigError{Pkg: "sqldb", Field: "dsn", Why: "cannot parse", Err: err}
	}
	if err := d.f.Configure(cfg); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	return newConnector(pool, true, d.f, nil), nil
}

// Open returns a connection from the pool for dsn, made on first use.
// database/sql does not call it (it uses OpenConnector).
func (d *Driver) Open(dsn string) (driver.Conn, error) {
	d.mu.Lock()
	c, ok := d.pools[dsn]
	if !ok {
		dc, err := d.OpenConnector(dsn)
		if err != nil {
			d.mu.Unlock()
			return nil, err
		}
		c = dc.(*Connector)
		if d.pools == nil {
			d.pools = map[string]*Connector{}
		}
		d.pools[dsn] = c
	}
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	return c.Connect(ctx)
}

// openTimeout bounds Driver.Open, which has no context (pgx's stdlib uses
// the same bound).
const openTimeout = 60 * time.Second

// ReasonBadConn is the classify reason of [Rule].
const ReasonBadConn = "sql-bad-conn"

// Rule classifies driver.ErrBadConn as Transient, for a caller that
// retries a whole transaction (classify.New(sqldb.Rule), or
// holdfast.WithClassifier(sqldb.Rule)). database/sql returns ErrBadConn to
// its caller only when its own retries ran out, or inside a transaction or
// on a held *sql.Conn, and pgx's stdlib returns it only when nothing of the
// statement was sent (pgconn.SafeToRetry): the transaction did not commit,
// and running it again from the start is safe.
func Rule(err error) (classify.Verdict, bool) {
	if errors.Is(err, driver.ErrBadConn) {
		return classify.Verdict{Class: classify.Transient, Reason: ReasonBadConn}, true
	}
	return classify.Verdict{}, false
}

// RunTx runs fn in a transaction of db, as holdfast's Factory.RunTx does
// for a pool, with the same runner: BEGIN with opts (nil: the driver's
// defaults), fn, COMMIT (ROLLBACK when fn returns an error), and the whole
// of it again only when the failure proves that nothing committed —
// 40001, 40P01, a connection that failed before COMMIT was sent, nothing
// sent at all (driver.ErrBadConn), 25006 on a connection that holdfast's
// failover layer closed (a writer turned read-only), holdfast's own waits
// and refusals. It
// never runs fn again when fn returned an error of its own, nor after
// COMMIT was sent and its answer was lost: that returns a
// *holdfast.OutcomeUnknownError (errors.Is(err,
// holdfast.ErrOutcomeUnknown)). The re-runs follow f's transaction policy
// (holdfast.WithTxPolicy), ctx's deadline and f's retry budget; f is the
// factory of db's pool. fn should do nothing but the transaction's work:
// it may run more than once.
func RunTx(ctx context.Context, f *holdfast.Factory, db *sql.DB, opts *sql.TxOptions, fn func(*sql.Tx) error) error {
	switch {
	case f == nil:
		return &ConfigError{Pkg: "sqldb", Field: "factory", Why: "nil: the factory of db's pool"}
	case db == nil:
		return &ConfigError{Pkg: "sqldb", Field: "db", Why: "nil *sql.DB"}
	case fn == nil:
		return &ConfigError{Pkg: "sqldb", Field: "fn", Why: "nil func"}
	}
	return f.RunTx(ctx, sqlBeginner{db: db, opts: opts}, pgx.TxOptions{}, func(tx pgx.Tx) error {
		return fn(tx.(*sqlTx).tx)
	})
}

// sqlBeginner begins database/sql transactions for holdfast's runner.
type sqlBeginner struct {
	db   *sql.DB
	opts *sql.TxOptions
}

// Pool returns the pool under the *sql.DB (nil for one sqldb did not
// open), whose target the runner's telemetry names (conn.Pooled).
func (b sqlBeginner) Pool() *pgxpool.Pool { return PoolOf(b.db) }

// BeginTx takes a connection of db (sql.DB.Conn: database/sql's checks
// and retries of a bad connection apply) and begins the transaction on
// it, keeping the pgx connection under it (sql.Conn.Raw), whose state
// after a failure the runner reads: ConnClosed.
func (b sqlBeginner) BeginTx(ctx context.Context, _ pgx.TxOptions) (pgx.Tx, error) {
	sc, err := b.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var pc *pgx.Conn
	_ = sc.Raw(func(dc any) error {
		if c, ok := dc.(*stdlib.Conn); ok {
			pc = c.Conn()
		}
		return nil
	})
	tx, err := sc.BeginTx(ctx, b.opts)
	if err != nil {
		_ = sc.Close()
		return nil, err
	}
	return &sqlTx{tx: tx, sc: sc, pc: pc}, nil
}

// sqlTx carries a *sql.Tx through holdfast's runner, which calls only its
// Commit, Rollback, Conn (nil: database/sql's connection is not the
// runner's to use; its own checks of it are skipped) and ConnClosed, and
// hands it back to RunTx's fn. Commit and Rollback hand the connection
// back to db.
type sqlTx struct {
	pgx.Tx
	tx *sql.Tx
	sc *sql.Conn
	pc *pgx.Conn // under sc; nil if not a pgx connection
}

func (t *sqlTx) Commit(context.Context) error {
	err := t.tx.Commit()
	_ = t.sc.Close()
	return err
}

func (t *sqlTx) Rollback(context.Context) error {
	err := t.tx.Rollback()
	_ = t.sc.Close()
	return err
}

func (t *sqlTx) Conn() *pgx.Conn { return nil }

// ConnClosed reports whether the pgx connection under the transaction is
// closed (holdfast's failover layer closes one that answered 25006 from a
// server that left the writer's role): read by the runner after the
// function's failure, as it reads a pgx transaction's connection.
func (t *sqlTx) ConnClosed() bool { return t.pc != nil && t.pc.PgConn().IsClosed() }
