package cloudsqltest_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/cloudsqlconn"
	"github.com/jackc/pgx/v5"

	fake "github.com/holdfast-db/holdfast/fakes/cloudsqltest"
	"github.com/holdfast-db/holdfast/fakes/outagetest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// connect opens a pgx connection through d to name, with dsn's user and
// database.
func connect(ctx context.Context, t *testing.T, d *cloudsqlconn.Dialer, name, dsn string) (*pgx.Conn, error) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSConfig, cfg.Fallbacks = nil, nil
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.Dial(ctx, name) }
	cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	return pgx.ConnectConfig(ctx, cfg)
}

const superuser = "host=localhost user=postgres dbname=postgres sslmode=disable"

// TestMaintenanceCut: an Enterprise Plus maintenance ends the open
// connections at once, refuses new ones for the cut, then accepts them on
// the same server.
func TestMaintenanceCut(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newFake(t, fake.Config{})
	d := newDialer(t, s, false)
	c, err := connect(ctx, t, d, s.ConnName(), superuser)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())

	done := make(chan struct{})
	var sw fake.Switch
	var swErr error
	go func() {
		defer close(done)
		sw, swErr = s.Maintenance(ctx, 400*time.Millisecond)
	}()
	// While the cut lasts, a dial is refused. The cut has started once the
	// open connection is gone.
	if err := c.Ping(ctx); err == nil {
		// The ping may have run before the cut: a second one after it.
		for err == nil && ctx.Err() == nil {
			select {
			case <-done:
				t.Fatal("the maintenance ended and the connection survived it")
			default:
			}
			err = c.Ping(ctx)
		}
	}
	_, err = d.Dial(ctx, s.ConnName())
	select {
	case <-done:
		t.Log("the cut ended before the dial; no refusal checked")
	default:
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial during the cut = %v, want ECONNREFUSED", err)
		}
	}
	<-done
	if swErr != nil {
		t.Fatal(swErr)
	}
	if sw.Dropped != 1 || sw.From != s.ConnName() || sw.To != s.ConnName() {
		t.Errorf("switch = %+v, want 1 dropped, the same instance", sw)
	}
	if got := sw.Accepting.Sub(sw.Cut); got < 400*time.Millisecond || got > 2*time.Second {
		t.Errorf("the cut lasted %v, want 400ms", got)
	}
	c2, err := connect(ctx, t, d, s.ConnName(), superuser)
	if err != nil {
		t.Fatalf("connect after the maintenance: %v", err)
	}
	_ = c2.Close(ctx)
}

// TestFailoverKeepsCommittedRows: an HA failover whose standby takes over
// the regional disk (a crash and restart of the PostgreSQL) keeps every
// committed row, and the instance accepts again only after the downtime.
func TestFailoverKeepsCommittedRows(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	// A server of its own (it restarts), with durable commits (pgtest's
	// default turns them off for speed).
	pg, err := pgtest.Start(ctx, pgtest.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	s := newFake(t, fake.Config{Backend: pg.Addr()})
	d := newDialer(t, s, false)
	c, err := connect(ctx, t, d, s.ConnName(), superuser)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	sw, err := s.Failover(ctx, time.Second, func(ctx context.Context) error {
		if err := pg.Shutdown(ctx, pgtest.ShutdownImmediate); err != nil {
			return err
		}
		return pg.Restart(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if sw.Dropped != 1 || sw.Accepting.Sub(sw.Cut) < time.Second {
		t.Errorf("switch = %+v, want 1 dropped and at least 1s down", sw)
	}
	if err := c.Ping(ctx); err == nil {
		t.Error("the connection survived the failover")
	}
	c2, err := connect(ctx, t, d, s.ConnName(), superuser)
	if err != nil {
		t.Fatalf("connect after the failover: %v", err)
	}
	defer c2.Close(context.Background())
	var n int
	if err := c2.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 2 {
		t.Errorf("rows after the failover = %d, %v; want 2", n, err)
	}
}

// TestSwitchoverMovesWriteEndpoint: the real connector's DNS resolver
// follows the write endpoint to the primary through resolveConnectSettings,
// and, when a switchover moves it, closes its connections to the old
// primary at its next check and dials the new one.
func TestSwitchoverMovesWriteEndpoint(t *testing.T) {
	t.Parallel()
	pair := outagetest.StartPairTest(t, outagetest.PairConfig{})
	ctx := testCtx(t)
	s := newFake(t, fake.Config{Backend: pair.Addr("pg-1"), DRBackend: pair.Addr("pg-2")})
	d := newDialer(t, s, false, cloudsqlconn.WithDNSResolver(), cloudsqlconn.WithFailoverPeriod(100*time.Millisecond))
	dsn := pair.DSN("localhost")
	ep := s.WriteEndpoint()
	if ep == "" {
		t.Fatal("no write endpoint")
	}
	c, err := connect(ctx, t, d, ep, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "CREATE TABLE acked (id int); INSERT INTO acked VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.ResolveConnectSettings < 1 {
		t.Errorf("resolveConnectSettings calls = %d, want at least 1", st.ResolveConnectSettings)
	}
	// old is a connection opened through the endpoint after the demote and
	// before the name moves: to the old primary, now a standby.
	var old *pgx.Conn
	sw, err := s.Switchover(ctx, func(ctx context.Context) error {
		if _, err := pair.Demote(ctx, outagetest.DemoteScenario{Hold: true}); err != nil {
			return err
		}
		var err error
		old, err = connect(ctx, t, d, ep, dsn)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(context.Background())
	// The connector closes it when its check sees the name move: the wait
	// ends when the socket does.
	moved := time.Now()
	if err := old.PgConn().WaitForNotification(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("the connection to the old primary was not closed by the connector: %v", err)
	}
	if got := time.Since(moved); got > 2*time.Second {
		t.Errorf("the connector closed the old primary's connection %v after the move, want within its failover period (100ms) and a margin", got)
	}
	if sw.From != s.ConnName() || sw.To == s.ConnName() {
		t.Errorf("switch = %+v, want from the first instance to the replica", sw)
	}
	c2, err := connect(ctx, t, d, ep, dsn)
	if err != nil {
		t.Fatalf("connect after the switchover: %v", err)
	}
	defer c2.Close(context.Background())
	var inRecovery bool
	var n int
	if err := c2.QueryRow(ctx, "SELECT pg_is_in_recovery(), (SELECT count(*) FROM acked)").Scan(&inRecovery, &n); err != nil {
		t.Fatal(err)
	}
	if inRecovery || n != 1 {
		t.Errorf("after the switchover: in recovery %v, rows %d; want the new primary with the row", inRecovery, n)
	}
	if _, err := c2.Exec(ctx, "INSERT INTO acked VALUES (2)"); err != nil {
		t.Errorf("write on the new primary: %v", err)
	}
}
