package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"github.com/holdfast-db/holdfast/internal/cfgerr"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
)

// ErrInvalidConfig is matched by every *ConfigError.
var ErrInvalidConfig = cfgerr.ErrInvalid

// ConfigError reports a nil or nonsense option, argument or configuration
// field. It is not retryable: fix the configuration. Every package of
// holdfast reports its configuration errors with this one type
// (holdfast.ConfigError, bluegreen.ConfigError, failover.ConfigError, ...
// are the same), so one errors.As finds any of them; Error reads
// "sqldb: invalid <Field>: <Why>", and Unwrap returns Err.
type ConfigError = cfgerr.Error

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
// *holdfast.StartupError when the database cannot be reached).
//
// opts are pgx stdlib options. database/sql never reuses a connection of a
// sqldb *sql.DB (see [Conn]), so stdlib's reuse hooks,
// stdlib.OptionResetSession and stdlib.OptionShouldPing, are not called,
// and stdlib ignores OptionBeforeConnect and OptionAfterConnect for a
// pool: set the pool's hooks on cfg instead (PrepareConn, AfterRelease,
// ShouldPing, AfterConnect).
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
	c := NewConnector(pool, opts...)
	c.f = f
	return open(c), nil
}

// OpenDB returns a *sql.DB over pool, a pool built from a config that a
// holdfast.Factory configured (NewPool, or Configure then
// pgxpool.NewWithConfig). Closing the *sql.DB leaves the pool open.
func OpenDB(pool *pgxpool.Pool, opts ...stdlib.OptionOpenDB) *sql.DB {
	return open(&Connector{base: stdlib.GetPoolConnector(pool, opts...), pool: pool})
}

func open(c *Connector) *sql.DB {
	db := sql.OpenDB(c)
	db.SetMaxIdleConns(0) // the pool keeps the idle connections (Conn.IsValid says so too)
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
// its holdfast name (holdfast.Factory.PoolName). It returns nil for a nil
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
// database/sql keeps no idle connection of a Connector's *sql.DB, whatever
// its SetMaxIdleConns: every connection it returns goes back to the pool,
// which keeps the idle ones (see [Conn]).
type Connector struct {
	base  driver.Connector
	pool  *pgxpool.Pool
	owned bool              // Close closes pool
	f     *holdfast.Factory // Open's and RegisterDriver's: Connect retries as Factory.Acquire does

	mu      sync.Mutex
	held    int     // connections acquired (or being acquired) and not yet closed
	closing bool    // Close was called: the release of the last held connection closes the pool
	db      *sql.DB // the *sql.DB of Open or OpenDB over it, registered for PoolOf; else nil
}

// Pool returns the pool the Connector acquires its connections from.
func (c *Connector) Pool() *pgxpool.Pool { return c.pool }

// NewConnector returns a Connector over pool that closes pool when closed.
func NewConnector(pool *pgxpool.Pool, opts ...stdlib.OptionOpenDB) *Connector {
	return &Connector{base: stdlib.GetPoolConnector(pool, opts...), pool: pool, owned: true}
}

// Connect acquires a connection from the pool, bounded by ctx, and returns
// it as a *[Conn]. Every connect of the pool is retried by the factory
// that configured it; a Connector from [Open] or [RegisterDriver] also
// retries a failed acquire as holdfast.Factory.Acquire does
// (Factory.Reacquire): one retry of a 28P01 with a freshly fetched
// password or token, which pgx does not retry inside a connect. After
// Close it returns [ErrClosed].
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	// Count the connection before acquiring it, so that a Close meanwhile
	// leaves the pool to its release.
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.held++
	c.mu.Unlock()
	conn, err := c.connect(ctx)
	if err != nil {
		c.release()
		return nil, err
	}
	sc, ok := conn.(*stdlib.Conn)
	if !ok { // pgx's pool connector returns a *stdlib.Conn
		conn.Close()
		c.release()
		return nil, fmt.Errorf("sqldb: pgx's stdlib returned a %T, want a *stdlib.Conn", conn)
	}
	return &Conn{stdConn: sc, c: c}, nil
}

func (c *Connector) connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err == nil || c.f == nil {
		return conn, err
	}
	err = c.f.Reacquire(ctx, c.pool, err, func(ctx context.Context) error {
		var err error
		conn, err = c.base.Connect(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return conn, nil
}

// release ends the count of one connection; the last one after Close
// closes the pool.
func (c *Connector) release() {
	c.mu.Lock()
	c.held--
	last := c.closing && c.held == 0
	c.mu.Unlock()
	if last && c.owned {
		c.closePool() // nothing of ours is acquired: it does not wait
	}
}

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
// DB.Close. It never waits for a connection the application still holds
// (a Rows, a Tx or a *sql.Conn, which DB.Close leaves open as database/sql
// does): it closes the pool's idle connections at once, and the release
// of the last held connection closes the pool. Connect then returns
// [ErrClosed], and [PoolOf] of its *sql.DB returns nil. Closing a
// Connector a second time does nothing.
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
	now := c.held == 0
	if c.owned && !now {
		// Under mu, so that it comes before the last release's Close.
		c.pool.Reset()
	}
	c.mu.Unlock()
	if c.owned && now {
		c.closePool()
	}
	return nil
}

// stdConn names pgx's connection as Conn's embedded field, so that Conn
// has every method of *stdlib.Conn, Conn() *pgx.Conn included.
type stdConn = stdlib.Conn

// Conn is the driver.Conn of every sqldb *sql.DB: pgx's *stdlib.Conn, with
// every method of it, over a connection acquired from the pool. database/sql
// never keeps it idle: IsValid reports false, so database/sql closes it
// when the application is done with it (after a statement, Rows.Close,
// Tx.Commit or Rollback, *sql.Conn.Close), which returns the connection to
// the pool; the pool keeps the idle connections and checks their health.
// A *sql.DB of sqldb therefore behaves as SetMaxIdleConns(0), also one
// from [RegisterDriver] and sql.Open, on which sqldb cannot call it.
//
// In *sql.Conn.Raw the driver connection is a *Conn, not a *stdlib.Conn:
// get the *pgx.Conn with driverConn.(*sqldb.Conn).Conn(), or, for code
// that also runs on plain pgx stdlib, driverConn.(interface{ Conn() *pgx.Conn }).
type Conn struct {
	*stdConn
	c      *Connector
	closed atomic.Bool // the Connector's count of it has ended
}

// Conn returns the underlying *pgx.Conn.
func (c *Conn) Conn() *pgx.Conn { return c.stdConn.Conn() }

// IsValid implements driver.Validator: false, so that database/sql
// closes the connection (returns it to the pool) instead of keeping it
// idle.
func (c *Conn) IsValid() bool { return false }

// Close returns the connection to the pool. It is the release of the
// last held connection after the Connector's Close that closes the pool.
func (c *Conn) Close() error {
	err := c.stdConn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.c.release()
	}
	return err
}

// RegisterDriver registers name as a database/sql driver whose data source
// names are pgx connection strings (URLs or key=value), for tools that open
// a database by driver name and DSN only. Each sql.Open(name, dsn) builds
// its own pool configured by f, without connecting (connections are made
// on first use, retried as usual); DB.Close closes it.
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
	c := NewConnector(pool)
	c.f = d.f
	return c, nil
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

// BeginTxFunc runs fn in a transaction of db, as holdfast's
// Factory.BeginTxFunc does for a pgxpool: BEGIN with opts, fn, COMMIT
// (ROLLBACK when fn returns an error), and the whole of it again only when
// the failure proves that nothing committed — 40001, 40P01, a connection
// that failed before COMMIT was sent, nothing sent at all
// (driver.ErrBadConn), holdfast's own waits and refusals. It never runs fn
// again when fn returned an error of its own, nor after COMMIT was sent
// and its answer was lost: that returns a *holdfast.OutcomeUnknownError
// (errors.Is(err, holdfast.ErrOutcomeUnknown)). The re-runs follow f's
// transaction policy (holdfast.WithTxPolicy), ctx's deadline and f's retry
// budget; f is the factory of db's pool. fn should do nothing but the
// transaction's work: it may run more than once.
func BeginTxFunc(ctx context.Context, f *holdfast.Factory, db *sql.DB, opts *sql.TxOptions, fn func(*sql.Tx) error) error {
	switch {
	case f == nil:
		return &ConfigError{Pkg: "sqldb", Field: "factory", Why: "nil: the factory of db's pool"}
	case db == nil:
		return &ConfigError{Pkg: "sqldb", Field: "db", Why: "nil *sql.DB"}
	case fn == nil:
		return &ConfigError{Pkg: "sqldb", Field: "fn", Why: "nil func"}
	}
	return f.RunTx(ctx, func(ctx context.Context) (bool, error) {
		tx, err := db.BeginTx(ctx, opts)
		if err != nil {
			return false, err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			return false, err
		}
		return true, tx.Commit()
	})
}
