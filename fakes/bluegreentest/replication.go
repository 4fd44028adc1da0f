package bluegreentest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Logical replication needs these server settings; pass them in
// Config.Settings (or use [ReplicationSettings]) when the Env is started.
var replicationSettings = map[string]string{
	"wal_level":                       "logical",
	"max_replication_slots":           "20",
	"max_wal_senders":                 "20",
	"max_logical_replication_workers": "12",
	"max_worker_processes":            "24",
	// The launcher starts replication workers at most this often (default
	// 5 s): subscriptions created together would wait that long.
	"wal_retrieve_retry_interval": "50ms",
}

// ReplicationSettings returns the postgresql.conf settings that
// [Deployment.Replicate] needs, to merge into Config.Settings: wal_level
// logical, room for a dozen subscriptions, and replication workers started
// without delay.
func ReplicationSettings() map[string]string {
	out := make(map[string]string, len(replicationSettings))
	for k, v := range replicationSettings {
		out[k] = v
	}
	return out
}

// markerTable is replicated with the application tables: CatchUp writes a
// row on blue and waits for it on green. Logical replication applies
// transactions in commit order, so every transaction blue committed before
// the marker is on green once the marker is.
const markerTable = "holdfast_fake.replication_marker"

// Replication is the logical replication of a deployment's application
// tables from blue to green, as RDS keeps a green environment in sync: a
// publication in blue's database and a subscription in green's. Until the
// switchover green is read-only for clients (default_transaction_read_only
// in its database), as an RDS green environment is.
//
// A Replication is safe for concurrent use; it owns no goroutines (the
// servers' replication workers do the work).
type Replication struct {
	d      *Deployment
	name   string // publication, subscription and slot name
	tables []string
}

// Replicate creates the application tables with ddl (run on both servers,
// in the deployment's database) and replicates tables (schema-qualified or
// not, as in ddl) from blue to green, waiting until the initial copy is
// done. Every replicated table needs a primary key. The Env must have been
// started with [ReplicationSettings]. It makes green's database read-only
// for new client sessions until [Replication.Promote].
func (d *Deployment) Replicate(ctx context.Context, ddl string, tables ...string) (*Replication, error) {
	if len(tables) == 0 {
		return nil, errors.New("fakes/bluegreentest: replicate: no tables")
	}
	r := &Replication{d: d, name: "holdfast_" + d.Database, tables: append([]string{markerTable}, tables...)}
	schema := `CREATE SCHEMA IF NOT EXISTS holdfast_fake;
CREATE TABLE IF NOT EXISTS ` + markerTable + ` (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now());
` + ddl
	for _, s := range []*Server{d.Env.Blue, d.Env.Green} {
		if err := s.Exec(ctx, d.Database, schema); err != nil {
			return nil, fmt.Errorf("fakes/bluegreentest: replicate: %w", err)
		}
	}
	blue, green := d.Env.Blue, d.Env.Green
	if err := blue.Exec(ctx, d.Database, "CREATE PUBLICATION "+r.name+" FOR TABLE "+strings.Join(r.tables, ", ")); err != nil {
		return nil, fmt.Errorf("fakes/bluegreentest: replicate: %w", err)
	}
	// Green is read-only for clients before the subscription starts: the
	// replication workers apply changes all the same.
	if err := green.Exec(ctx, "postgres", "ALTER DATABASE "+d.Database+" SET default_transaction_read_only = on"); err != nil {
		return nil, fmt.Errorf("fakes/bluegreentest: replicate: %w", err)
	}
	// Server to server: blue's listen address, not the one clients see.
	conninfo := fmt.Sprintf("host=%s port=%d dbname=%s user=postgres sslmode=disable", blue.srv.Host, blue.srv.Port, d.Database)
	if err := execSession(ctx, green, d.Database,
		"SET default_transaction_read_only = off",
		"CREATE SUBSCRIPTION "+r.name+" CONNECTION "+quote(conninfo)+" PUBLICATION "+r.name); err != nil {
		return nil, fmt.Errorf("fakes/bluegreentest: replicate: %w", err)
	}
	if err := r.waitSynced(ctx); err != nil {
		return nil, err
	}
	if err := r.CatchUp(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// execSession runs statements one at a time on one superuser session to
// database db on s.
func execSession(ctx context.Context, s *Server, db string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	defer conn.Close(context.Background())
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
	}
	return nil
}

// waitSynced waits until every table's initial copy is done.
func (r *Replication) waitSynced(ctx context.Context) error {
	return poll(ctx, r.d.Env.Green, r.d.Database, "initial copy", func(ctx context.Context, c *pgx.Conn) (bool, error) {
		var pending int
		err := c.QueryRow(ctx, `SELECT count(*) FROM pg_subscription_rel sr JOIN pg_subscription s ON s.oid = sr.srsubid
			WHERE s.subname = $1 AND sr.srsubstate <> 'r'`, r.name).Scan(&pending)
		return err == nil && pending == 0, err
	})
}

// CatchUp waits until green has applied every transaction blue committed
// before the call: it writes a marker row on blue (as the superuser, in a
// READ WRITE transaction, so it works on a read-only blue) and waits until
// green has it. ctx bounds the wait.
func (r *Replication) CatchUp(ctx context.Context) error {
	var id int64
	conn, err := pgx.Connect(ctx, r.d.Env.Blue.DSN(r.d.Database))
	if err != nil {
		return fmt.Errorf("fakes/bluegreentest: catch up: %w", err)
	}
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{AccessMode: pgx.ReadWrite}, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "INSERT INTO "+markerTable+" DEFAULT VALUES RETURNING id").Scan(&id)
	})
	conn.Close(context.Background())
	if err != nil {
		return fmt.Errorf("fakes/bluegreentest: catch up: %w", err)
	}
	return poll(ctx, r.d.Env.Green, r.d.Database, "catch up", func(ctx context.Context, c *pgx.Conn) (bool, error) {
		var ok bool
		err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+markerTable+" WHERE id = $1)", id).Scan(&ok)
		return ok, err
	})
}

// Promote ends the replication and makes green's database writable, as
// RDS does in SWITCHOVER_IN_PROGRESS once green has caught up: the
// subscription is disabled (later writes on blue, which should not happen,
// stay on blue, where [Deployment] checks can find them) and green's
// client sessions, opened read-only, are terminated (57P01).
func (r *Replication) Promote(ctx context.Context) error {
	green := r.d.Env.Green
	if err := execSession(ctx, green, r.d.Database, "SET default_transaction_read_only = off",
		"ALTER SUBSCRIPTION "+r.name+" DISABLE",
		"ALTER DATABASE "+r.d.Database+" RESET default_transaction_read_only"); err != nil {
		return fmt.Errorf("fakes/bluegreentest: promote green: %w", err)
	}
	return terminate(ctx, green, r.d.Database)
}

// Stop drops the subscription (and with it the replication slot on blue)
// and the publication, so that the deployment's databases can be dropped.
// Call it before [Deployment.Drop]; it is not needed before [Env.Close].
func (r *Replication) Stop(ctx context.Context) error {
	green, blue := r.d.Env.Green, r.d.Env.Blue
	err := execSession(ctx, green, r.d.Database, "SET default_transaction_read_only = off",
		"ALTER SUBSCRIPTION "+r.name+" DISABLE", "DROP SUBSCRIPTION "+r.name)
	return errors.Join(err, execSession(ctx, blue, r.d.Database, "SET default_transaction_read_only = off",
		"DROP PUBLICATION IF EXISTS "+r.name))
}

// terminate ends every client session of database db on s, except the
// caller's: the sessions see SQLSTATE 57P01 (admin_shutdown). Replication
// workers and WAL senders are not client sessions and are left alone.
func terminate(ctx context.Context, s *Server, db string) error {
	return s.Exec(ctx, "postgres", `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = `+quote(db)+` AND backend_type = 'client backend' AND pid <> pg_backend_pid()`)
}

// poll runs check on one connection to db on s every 10 ms until it
// reports true, fails, or ctx ends.
func poll(ctx context.Context, s *Server, db, what string, check func(context.Context, *pgx.Conn) (bool, error)) error {
	conn, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		return fmt.Errorf("fakes/bluegreentest: %s: %w", what, err)
	}
	defer conn.Close(context.Background())
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := check(ctx, conn)
		if err != nil {
			return fmt.Errorf("fakes/bluegreentest: %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fakes/bluegreentest: %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}
