package holdfast_test

import (
	"context"
	"log"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
)

// The reader config NewReadWrite derives from a writer's, and the error
// for a writer host that is no cluster endpoint.
func TestReaderConfigDerived(t *testing.T) {
	f, err := holdfast.New()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg := mustParse("postgres://app@orders.cluster-abc123.us-east-1.rds.amazonaws.com:5432/app?sslmode=verify-full")
	rc, err := f.ReaderConfigForTest(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const reader = "orders.cluster-ro-abc123.us-east-1.rds.amazonaws.com"
	if rc.ConnConfig.Host != reader || rc.ConnConfig.TLSConfig.ServerName != reader {
		t.Errorf("host %s, TLS name %s; want %s", rc.ConnConfig.Host, rc.ConnConfig.TLSConfig.ServerName, reader)
	}
	_, err = f.ReaderConfigForTest(mustParse("postgres://app@orders-1.abc123.us-east-1.rds.amazonaws.com:5432/app"))
	if want := `holdfast: invalid writer: host "orders-1.abc123.us-east-1.rds.amazonaws.com" is not an RDS cluster (writer) endpoint NAME.cluster-ID.REGION.rds.amazonaws.com, nor a failover.Config.Aliases name of one: its reader endpoint cannot be derived; pass the reader endpoint's config to NewReadWrite`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

func mustParse(dsn string) *pgxpool.Config {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		log.Fatal(err)
	}
	return cfg
}

// Read/write splitting: writes to the writer, reads to the readers, and a
// read that must see the caller's own write to the writer. (It needs a
// cluster, so this example is compiled, not run.)
func ExampleFactory_NewReadWrite() {
	ctx := context.Background()
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{}))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL")) // the cluster (writer) endpoint
	if err != nil {
		log.Fatal(err)
	}
	rw, err := f.NewReadWrite(ctx, cfg, nil, holdfast.PoolName("orders")) // pools "orders" and "orders-ro"
	if err != nil {
		log.Fatal(err)
	}
	defer rw.Close()

	err = f.RunTx(ctx, rw.Write(), pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", 42, 100)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	// A reader may not have replayed the insert yet: this read goes to
	// the writer.
	ctx = holdfast.ReadYourWrites(ctx)
	var total int
	if err := rw.Read(ctx).QueryRow(ctx, "SELECT total FROM orders WHERE id = $1", 42).Scan(&total); err != nil {
		log.Fatal(err)
	}
	// Reports that may trail by the replica lag: a read-only transaction
	// on the readers.
	rctx := context.Background()
	err = f.RunTx(rctx, rw.Read(rctx), pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT sum(total) FROM orders").Scan(&total)
	})
	if err != nil {
		log.Fatal(err)
	}
}
