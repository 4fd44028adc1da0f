package harness

import (
	"context"
	"database/sql"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/sqldb"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pools are a demo's pools: a plain pgxpool, the same made by holdfast,
// and with -sql a *sql.DB over a holdfast pool of its own.
type Pools struct {
	Plain, Holdfast *pgxpool.Pool
	DB              *sql.DB
}

// OpenPools opens the plain pool (pgxpool.NewWithConfig), the holdfast
// pool (f.NewPool) and, withDB, the database/sql client's *sql.DB
// (sqldb.Open, the same factory), each on a config of its own from cfg,
// given its client's name: "pgxpool", "holdfast", "database/sql". The
// caller closes them ([Pools.Close]); on an error none is left open.
func OpenPools(ctx context.Context, f *holdfast.Factory, withDB bool, cfg func(client string) (*pgxpool.Config, error)) (Pools, error) {
	var p Pools
	c, err := cfg("pgxpool")
	if err == nil {
		p.Plain, err = pgxpool.NewWithConfig(ctx, c)
	}
	if err == nil {
		if c, err = cfg("holdfast"); err == nil {
			p.Holdfast, err = f.NewPool(ctx, c)
		}
	}
	if err == nil && withDB {
		if c, err = cfg("database/sql"); err == nil {
			p.DB, err = sqldb.Open(ctx, f, c)
		}
	}
	if err != nil {
		p.Close()
		return Pools{}, err
	}
	return p, nil
}

// Close closes the pools that are open.
func (p Pools) Close() {
	if p.DB != nil {
		p.DB.Close()
	}
	for _, pool := range []*pgxpool.Pool{p.Holdfast, p.Plain} {
		if pool != nil {
			pool.Close()
		}
	}
}
