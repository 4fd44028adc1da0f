package sqldb_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/holdfast-db/holdfast/sqldb"
)

// PoolOf finds the pool under a *sql.DB of Open and OpenDB while the DB is
// open, and forgets it when the DB is closed; it knows nothing of the
// *sql.DBs sqldb did not build itself (Connector.Pool has those).
func TestPoolOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		kind     string
		wantPool bool // PoolOf finds a pool while the DB is open
	}{
		{"Open", true},
		{"OpenDB", true},
		{"NewConnector", false},
		{"RegisterDriver", false},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			t.Parallel()
			o := openBy(t, tt.kind)
			pool := sqldb.PoolOf(o.db)
			switch {
			case !tt.wantPool && pool != nil:
				t.Fatalf("PoolOf = %p, want nil", pool)
			case tt.wantPool && pool == nil:
				t.Fatal("PoolOf = nil, want the DB's pool")
			case o.pool != nil && tt.wantPool && pool != o.pool:
				t.Fatalf("PoolOf = %p, want the pool given to %s (%p)", pool, tt.kind, o.pool)
			}
			if o.c != nil && o.c.Pool() != o.pool {
				t.Errorf("Connector.Pool = %p, want %p", o.c.Pool(), o.pool)
			}
			if pool != nil {
				// The pool is the DB's: a statement through the DB uses it.
				conn, err := o.db.Conn(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if got := pool.Stat().AcquiredConns(); got != 1 {
					t.Errorf("with a *sql.Conn held, the pool has %d acquired connections, want 1", got)
				}
				conn.Close()
			}
			if err := o.db.Close(); err != nil {
				t.Fatal(err)
			}
			if p := sqldb.PoolOf(o.db); p != nil {
				t.Errorf("PoolOf after DB.Close = %p, want nil", p)
			}
		})
	}
	if p := sqldb.PoolOf(nil); p != nil {
		t.Errorf("PoolOf(nil) = %p", p)
	}
	if p := sqldb.PoolOf(&sql.DB{}); p != nil {
		t.Errorf("PoolOf(a foreign DB) = %p", p)
	}
}
