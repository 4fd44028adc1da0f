package conn

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/obs"
)

// Target returns the target of the pool (what its log lines and metrics
// name: pool.name, server.address, server.port, db.namespace); nil for a
// nil Pool.
func (p *Pool) Target() *obs.Target {
	if p == nil {
		return nil
	}
	return p.target
}

// ConnTarget returns the target of the pool whose connector made c, or
// nil for a connection no engine made.
func ConnTarget(c *pgx.Conn) *obs.Target {
	if c == nil {
		return nil
	}
	if s, ok := compose.ConnOf(c).(*connState); ok {
		return s.target
	}
	return nil
}

// Pooled is a transaction runner's db that knows the pool behind it
// (sqldb.RunTx's *sql.DB), so that the runner's telemetry names that
// pool's target.
type Pooled interface {
	Pool() *pgxpool.Pool
}

// InactiveWrite returns err as a *failover.WriterRegionError when it
// is a 25006 on c, a connection of a pool on a secondary Region's
// inactive cluster endpoint of an Aurora Global Database; nil otherwise
// (and for a connection no engine made). On the failure path only.
func InactiveWrite(c *pgx.Conn, err error) error {
	if c == nil {
		return nil
	}
	s, ok := compose.ConnOf(c).(*connState)
	if !ok || s.p == nil || s.p.fo == nil {
		return nil
	}
	return s.p.fo.InactiveWrite(err)
}

// PoolInactiveWrite is InactiveWrite for a connection known only by its
// pool (database/sql's, through sqldb.RunTx).
func PoolInactiveWrite(pool *pgxpool.Pool, err error) error {
	p := OfPool(pool)
	if p == nil || p.fo == nil {
		return nil
	}
	return p.fo.InactiveWrite(err)
}
