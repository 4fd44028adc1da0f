package alloydbtest_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/alloydbconn"
	"github.com/jackc/pgx/v5"

	fake "github.com/holdfast-db/holdfast/fakes/alloydbtest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// backend returns the address of the package's PostgreSQL server.
func backend(t *testing.T) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// newFake starts a fake forwarding to the package's PostgreSQL server.
func newFake(t *testing.T, cfg fake.Config) *fake.Server {
	t.Helper()
	if cfg.Backend == "" {
		cfg.Backend = backend(t)
	}
	s, err := fake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// newDialer builds a real alloydbconn dialer pointed at s.
func newDialer(t *testing.T, s *fake.Server, iam bool, extra ...alloydbconn.Option) *alloydbconn.Dialer {
	t.Helper()
	opts, err := s.DialerOptions()
	if iam {
		opts, err = s.IAMDialerOptions()
	}
	if err != nil {
		t.Fatal(err)
	}
	d, err := alloydbconn.NewDialer(context.Background(), append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// query runs SELECT 1 over a pgx connection dialed by d to uri.
func query(t *testing.T, d *alloydbconn.Dialer, uri string) error {
	t.Helper()
	cfg, err := pgx.ParseConfig("host=localhost user=postgres dbname=postgres sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.Dial(ctx, uri) }
	ctx := ctxFor(t, 30*time.Second)
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	var one int
	return c.QueryRow(ctx, "SELECT 1").Scan(&one)
}

func TestRealDialerConnects(t *testing.T) {
	t.Parallel()
	for _, iam := range []bool{false, true} {
		t.Run("iam="+strconv.FormatBool(iam), func(t *testing.T) {
			t.Parallel()
			s := newFake(t, fake.Config{})
			d := newDialer(t, s, iam)
			start := time.Now()
			if err := query(t, d, s.URI()); err != nil {
				t.Fatalf("query: %v", err)
			}
			st := s.Stats()
			t.Logf("%v %+v", time.Since(start), st)
		})
	}
}
