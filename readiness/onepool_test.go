package readiness_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/sqldb"
)

// Issue 29, item 1: a pgxpool and a *sql.DB over it (sqldb.OpenDB), given
// as two targets as the package example wires them, are one database:
// New accepts them, and the Checker starts, checks (once per check, through
// database/sql), reports and drains one target, named after the pool.
func TestIssue29PoolAndDBOverItAreOneTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	queries := &queryCounter{}
	cfg.ConnConfig.Tracer = queries
	pool, err := f.NewPool(ctx, cfg, holdfast.PoolName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := sqldb.OpenDB(pool)
	t.Cleanup(func() { db.Close() })

	c, err := readiness.New(readiness.Config{Factory: f, DrainInterval: time.Millisecond}, readiness.Pool(pool), readiness.DB(db))
	if err != nil {
		t.Fatalf("New(Pool(pool), DB(sqldb.OpenDB(pool))) = %v, want one target", err)
	}
	t.Cleanup(c.Close)
	clock := newClock()
	readiness.SetClock(c, clock.Now)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}

	before := queries.n.Load()
	clock.Advance(time.Hour) // the cached result is stale: the next probe checks
	s := c.Check(ctx)
	if got := queries.n.Load() - before; got != 1 {
		t.Errorf("one check ran %d queries, want 1 (one target)", got)
	}
	if len(s.Targets) != 1 {
		t.Fatalf("Status has %d targets (%+v), want 1", len(s.Targets), s.Targets)
	}
	if ts := s.Targets[0]; ts.Name != "orders" || ts.Kind != "database/sql" || ts.Health != readiness.Pass || s.String() != "ok" {
		t.Errorf("target %q kind %q health %q, status %q; want orders, database/sql, pass, ok", ts.Name, ts.Kind, ts.Health, s)
	}

	// The drain counts the pool's connections once, whether the pool or
	// the *sql.DB holds them: a Checker of one target.
	held, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	_, err = c.Drain(ctx, "deploy", readiness.WithDrainTimeout(20*time.Millisecond))
	var te *readiness.DrainTimeoutError
	if !errors.As(err, &te) || te.InUse.AcquiredConns != 1 || te.ByTarget != nil {
		t.Errorf("Drain = %v, want a timeout with the 1 held connection, of one target", err)
	}
}

// Targets over one pool merge what they say; where they contradict each
// other, New names the later target and what to do.
func TestTargetsOverOnePool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		t.Fatal(err)
	}
	other, err := holdfast.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig("postgres://app@127.0.0.1:1/app")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Configure(cfg, holdfast.PoolName("orders")); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg) // never connects in this test
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db, db2 := sqldb.OpenDB(pool), sqldb.OpenDB(pool)
	t.Cleanup(func() { db.Close(); db2.Close() })

	t.Run("agree", func(t *testing.T) {
		for _, tt := range []struct {
			name     string
			targets  []readiness.Target
			want     string // the one target's name
			kind     string
			optional bool
		}{
			{"the DB first", []readiness.Target{readiness.DB(db), readiness.Pool(pool)}, "orders", "database/sql", false},
			{"the pool twice", []readiness.Target{readiness.Pool(pool), readiness.Pool(pool)}, "orders", "pgxpool", false},
			{"the DB twice", []readiness.Target{readiness.DB(db), readiness.DB(db)}, "orders", "database/sql", false},
			{"a name on one", []readiness.Target{readiness.Pool(pool), {DB: db, Name: "orders-sql"}}, "orders-sql", "database/sql", false},
			{"one name on both", []readiness.Target{{Pool: pool, Name: "main"}, {DB: db, Name: "main"}}, "main", "database/sql", false},
			{"both optional", []readiness.Target{{Pool: pool, Optional: true}, {DB: db, Optional: true}}, "orders", "database/sql", true},
			{"the pool given with its DB", []readiness.Target{readiness.Pool(pool), {DB: db, Pool: pool}}, "orders", "database/sql", false},
			{"a factory on one", []readiness.Target{readiness.Pool(pool), {DB: db, Factory: f}}, "orders", "database/sql", false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				c, err := readiness.New(readiness.Config{Factory: f}, tt.targets...)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				s := c.Status()
				if len(s.Targets) != 1 || s.Targets[0].Name != tt.want || s.Targets[0].Kind != tt.kind || s.Targets[0].Optional != tt.optional {
					t.Errorf("targets = %+v, want one %s %q optional %t", s.Targets, tt.kind, tt.want, tt.optional)
				}
			})
		}
	})

	t.Run("contradict", func(t *testing.T) {
		const tail = ": targets[1] and targets[0] reach one pool, so they are one database, checked and reported once; give it once, or make them agree"
		for _, tt := range []struct {
			name    string
			targets []readiness.Target
			want    string
		}{
			{"required and optional", []readiness.Target{readiness.Pool(pool), {DB: db, Optional: true}},
				"readiness: invalid targets[1].Optional: true, but false for targets[0]" + tail},
			{"two names", []readiness.Target{{Pool: pool, Name: "orders"}, {DB: db, Name: "orders-sql"}},
				`readiness: invalid targets[1].Name: "orders-sql", but targets[0] is named "orders"` + tail},
			{"two DBs", []readiness.Target{readiness.DB(db), readiness.DB(db2)},
				"readiness: invalid targets[1].DB: a second *sql.DB over the pool of targets[0]" + tail},
			{"two factories", []readiness.Target{{Pool: pool, Factory: f}, {DB: db, Factory: other}},
				"readiness: invalid targets[1].Factory: another factory than targets[0]'s" + tail},
		} {
			t.Run(tt.name, func(t *testing.T) {
				c, err := readiness.New(readiness.Config{Factory: f}, tt.targets...)
				if c != nil || !errors.As(err, new(*readiness.ConfigError)) || err.Error() != tt.want {
					t.Fatalf("New = %v, %v;\nwant a *ConfigError %q", c, err, tt.want)
				}
			})
		}
		// Merged targets keep their place: a later clash of names names
		// the target as given.
		_, err := readiness.New(readiness.Config{Factory: f}, readiness.Pool(pool), readiness.DB(db), readiness.Target{Pool: lazyPool(t), Name: "orders"})
		if err == nil || !strings.HasPrefix(err.Error(), `readiness: invalid targets[2].Name: "orders" is also the name of targets[0], another database`) {
			t.Errorf("New = %v, want targets[2]'s name refused", err)
		}
	})
}
