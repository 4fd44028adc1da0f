package alloydb_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/alloydbconn"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/alloydb"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes"
	fake "github.com/holdfast-db/holdfast/fakes/alloydbtest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
)

// TestReadPoolReaderOfReadWrite: one factory, alloydb.With the primary's
// URI, serves a ReadWrite whose reader config names the read pool's URI as
// its host: writes reach the primary, reads the read pool, each through
// its own server-side proxy. While the primary fails over (its address
// refuses connections, its pool's connections gone), the writer is held
// and fails Transient at its deadline (database-down), and the read pool keeps answering on new connections.
func TestReadPoolReaderOfReadWrite(t *testing.T) {
	t.Parallel()
	s := startFake(t, fake.Config{ReadPools: []fake.ReadPool{{Name: "reads", Backend: pgtest.Addr(t)}}})
	d := realDialer(t, s, false)
	var logs fakes.LogBuffer
	f := gcptest.NewFactory(t, &logs, alloydb.With(d, s.URI()))
	ctx := gcptest.CtxFor(t, 60*time.Second)

	writer, reader := gcptest.Parse(t, "user=postgres dbname=postgres"), gcptest.Parse(t, "host="+s.ReadPool("reads").URI()+" user=postgres dbname=postgres")
	rw, err := f.NewReadWrite(ctx, writer, reader, holdfast.PoolName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rw.Close)
	if _, err := rw.Write().Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("write: %v", err)
	}
	var one int
	if err := rw.Read(ctx).QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("read: %v", err)
	}
	primary, reads := s.Primary().Stats(), s.ReadPool("reads").Stats()
	if primary.Forwarded < 1 || reads.Forwarded < 1 {
		t.Fatalf("forwarded: primary %d, read pool %d; want each pool on its own instance", primary.Forwarded, reads.Forwarded)
	}

	// The primary fails over: new connections are refused, and the pools'
	// connections are gone.
	s.Primary().Refuse(-1)
	rw.Writer().Reset()
	rw.Reader().Reset()
	// The outage hold keeps the write waiting for the primary within its
	// deadline, and then fails it Transient: the database is down.
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = rw.Write().Exec(wctx, "SELECT 1")
	wcancel()
	if v := f.Classify(err); err == nil || v != (classify.Verdict{Class: classify.Transient, Reason: classify.ReasonDatabaseDown}) {
		t.Errorf("write during the failover = %v (%v), want transient/database-down", err, v)
	}
	start := time.Now()
	if err := rw.Read(ctx).QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("read during the primary's failover: %v", err)
	}
	gcptest.Measured(t, start)
	if got := s.ReadPool("reads").Stats().Forwarded; got <= reads.Forwarded {
		t.Errorf("read pool forwarded %d connections, no new one during the failover", got)
	}
}

// TestReadPoolFactoryOfItsOwn: the other pattern, one factory per
// instance URI: alloydb.With the read pool's URI dials the read pool,
// whatever the connection string's host.
func TestReadPoolFactoryOfItsOwn(t *testing.T) {
	t.Parallel()
	s := startFake(t, fake.Config{ReadPools: []fake.ReadPool{{Name: "reads", Backend: pgtest.Addr(t)}}})
	d := realDialer(t, s, false)
	var logs fakes.LogBuffer
	f := gcptest.NewFactory(t, &logs, alloydb.With(d, s.ReadPool("reads").URI()))
	pool, err := f.NewPoolFromDSN(gcptest.CtxFor(t, 30*time.Second), "host=localhost user=postgres dbname=postgres")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if got, p := s.ReadPool("reads").Stats().Forwarded, s.Primary().Stats().Dials; got != 1 || p != 0 {
		t.Errorf("read pool forwarded %d, primary dialed %d; want 1 and 0", got, p)
	}
}

// TestIAMAndPasswords: how the connector's IAM database authentication
// composes with holdfast's password handling. With WithIAMAuthN the pool
// has no password and holdfast none to fetch: the login token travels in
// the metadata exchange. A pool of a built-in user on the same dialer
// turns IAM off for its dials (WithDialIAMAuthN(false), a DialOption of
// With) and takes its password from WithPasswordFunc, with holdfast's one
// retry on a fresh password after 28P01.
func TestIAMAndPasswords(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewServer(t)
	ctx := gcptest.CtxFor(t, 60*time.Second)
	if err := pg.PasswordRole(ctx, "app", "s3cret"); err != nil {
		t.Fatal(err)
	}
	s := startFake(t, fake.Config{Backend: pg.Addr()})
	d := realDialer(t, s, true)

	t.Run("IAM, no password", func(t *testing.T) {
		var logs fakes.LogBuffer
		f := gcptest.NewFactory(t, &logs, alloydb.With(d, s.URI()))
		pool, err := f.NewPoolFromDSN(ctx, "user=postgres dbname=postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if st := s.Primary().Stats(); st.IAMLogins != 1 {
			t.Errorf("IAM logins = %d, want 1", st.IAMLogins)
		}
	})
	t.Run("built-in user, WithPasswordFunc", func(t *testing.T) {
		before := s.Primary().Stats().IAMLogins
		var calls atomic.Int32
		password := func(context.Context, string) (string, error) {
			if calls.Add(1) == 1 {
				return "rotated-away", nil // refused with 28P01, then fetched again
			}
			return "s3cret", nil
		}
		var logs fakes.LogBuffer
		f := gcptest.NewFactory(t, &logs, alloydb.With(d, s.URI(), alloydbconn.WithDialIAMAuthN(false)), holdfast.WithPasswordFunc(password))
		pool := gcptest.Pool(t, f, gcptest.Parse(t, "user=app dbname=postgres"))
		c, err := f.Acquire(ctx, pool)
		if err != nil {
			t.Fatalf("Acquire = %v, want success on a fresh password", err)
		}
		c.Release()
		if got := calls.Load(); got != 2 {
			t.Errorf("password fetched %d times, want 2", got)
		}
		if got := s.Primary().Stats().IAMLogins; got != before {
			t.Errorf("IAM logins went from %d to %d: the built-in user's dial asked for IAM", before, got)
		}
	})
}

// TestConnectorWithoutWith: the pattern alloydbconn's README shows for
// pgx (the dialer's Dial set as ConnConfig.DialFunc) with a holdfast
// factory that was not given alloydb.With. The factory cannot classify the
// connector's errors (a token 503 is Fatal "unknown"), and says so: one
// WARN per factory naming alloydb.With.
func TestConnectorWithoutWith(t *testing.T) {
	t.Parallel()
	s := startFake(t, fake.Config{})
	d := realDialer(t, s, false)
	var logs fakes.LogBuffer
	f := gcptest.NewFactory(t, &logs)
	cfg := gcptest.Parse(t, "host=localhost user=postgres dbname=postgres sslmode=disable")
	uri := s.URI()
	cfg.ConnConfig.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.Dial(ctx, uri) }
	pool := gcptest.Pool(t, f, cfg)
	s.Fail(fake.APIToken, 503, 100)
	gcptest.WantUnclassified(t, f, pool, &logs, "cloud.google.com/go/alloydbconn", "alloydb.With(dialer, instanceURI)")
}

// TestNewPoolStartup: NewPool makes the first connection through a token
// 503, and reports a Fatal startup error at once for a permission error.
func TestNewPoolStartup(t *testing.T) {
	t.Parallel()
	t.Run("login token 503 once", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{iam: true})
		e.fake.Fail(fake.LoginToken, 503, 1)
		if err := e.f.Start(gcptest.CtxFor(t, 60*time.Second), e.pool); err != nil {
			t.Fatalf("Start = %v", err)
		}
		if got := e.pool.Stat().NewConnsCount(); got != 1 {
			t.Errorf("NewConnsCount = %d, want 1", got)
		}
	})
	t.Run("403", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		e.fake.Fail(fake.ConnectionInfo, 403, -1)
		start := time.Now()
		err := e.f.Start(gcptest.CtxFor(t, 60*time.Second), e.pool)
		gcptest.Measured(t, start)
		var ce *holdfast.ConnectError
		if v := e.f.Classify(err); !errors.As(err, &ce) || ce.Layer != "startup" || v.Class != classify.Fatal || v.Reason != classify.ReasonAlloyDBPermissionDenied {
			t.Fatalf("Start = %v; want a fatal alloydb-permission-denied ConnectError of layer startup", err)
		}
		if got := e.dials.Load(); got != 1 {
			t.Errorf("dials = %d, want 1", got)
		}
	})
}
