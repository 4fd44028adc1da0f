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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
)

// ErrInvalidConfig is matched by every *ConfigError.
var ErrInvalidConfig = errors.New("sqldb: invalid configuration")

// ConfigError reports a nil or nonsense argument. It is not retryable: fix
// the call.
type ConfigError struct {
	Field string
	Why   string
	Err   error
}

func (e *ConfigError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("sqldb: invalid %s: %s: %v", e.Field, e.Why, e.Err)
	}
	return "sqldb: invalid " + e.Field + ": " + e.Why
}

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// Is matches ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Open builds a pool for cfg with f.NewPool (which configures cfg and makes
// the first connection under the factory's startup policy) and returns a
// *sql.DB over it. Closing the *sql.DB closes the pool. It returns a
// *ConfigError for a nil factory or config and NewPool's errors (a
// *holdfast.StartupError when the database cannot be reached).
//
// opts are pgx stdlib options (stdlib.OptionResetSession,
// stdlib.OptionShouldPing); stdlib ignores OptionBeforeConnect and
// OptionAfterConnect for a pool: set the pool's hooks on cfg instead.
func Open(ctx context.Context, f *holdfast.Factory, cfg *pgxpool.Config, opts ...stdlib.OptionOpenDB) (*sql.DB, error) {
	switch {
	case f == nil:
		return nil, &ConfigError{Field: "factory", Why: "nil: build one with holdfast.New"}
	case cfg == nil:
		return nil, &ConfigError{Field: "cfg", Why: "nil: build it with pgxpool.ParseConfig"}
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
	db.SetMaxIdleConns(0) // the pool keeps the idle connections
	return db
}

// Connector is a driver.Connector whose connections are acquired from a
// holdfast-configured pool; it owns the pool (Close closes it). Build one
// with [NewConnector]; sql.OpenDB(c) calls its Close on DB.Close. Set the
// *sql.DB's idle connections to zero (SetMaxIdleConns(0)): the pool keeps
// them, as [Open] does.
type Connector struct {
	base  driver.Connector
	pool  *pgxpool.Pool
	owned bool              // Close closes pool
	f     *holdfast.Factory // Open's and RegisterDriver's: Connect retries as Factory.Acquire does
	once  sync.Once
}

// NewConnector returns a Connector over pool that closes pool when closed.
func NewConnector(pool *pgxpool.Pool, opts ...stdlib.OptionOpenDB) *Connector {
	return &Connector{base: stdlib.GetPoolConnector(pool, opts...), pool: pool, owned: true}
}

// Connect acquires a connection from the pool, bounded by ctx. Every
// connect of the pool is retried by the factory that configured it; a
// Connector from [Open] or [RegisterDriver] also retries a failed acquire
// as holdfast.Factory.Acquire does (Factory.Reacquire): one retry of a
// 28P01 with a freshly fetched password or token, which pgx does not
// retry inside a connect.
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
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

// Driver returns pgx's stdlib driver.
func (c *Connector) Driver() driver.Driver { return c.base.Driver() }

// Close closes the pool the Connector owns. database/sql calls it from
// DB.Close.
func (c *Connector) Close() error {
	c.once.Do(func() {
		if c.owned {
			c.pool.Close()
		}
	})
	return nil
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
		return &ConfigError{Field: "name", Why: "empty"}
	case f == nil:
		return &ConfigError{Field: "factory", Why: "nil: build one with holdfast.New"}
	case slices.Contains(sql.Drivers(), name):
		return &ConfigError{Field: "name", Why: fmt.Sprintf("a driver named %q is already registered", name)}
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
		return nil, &ConfigError{Field: "dsn", Why: "cannot parse", Err: err}
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
