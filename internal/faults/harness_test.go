package faults_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
)

// testPolicy is retry.Default with short waits, so that the suite runs in
// seconds: 3 attempts, 10 ms doubling to at most 100 ms between them, 500
// ms per attempt, 5 s in all.
func testPolicy() retry.Policy {
	p := retry.Default()
	p.InitialInterval = 10 * time.Millisecond
	p.MaxInterval = 100 * time.Millisecond
	p.AttemptTimeout = 500 * time.Millisecond
	p.MaxElapsed = 5 * time.Second
	return p
}

// dialCounter is a pool's DialFunc that counts its dials (connect attempts
// and cancel requests alike). before, when set, runs before the n-th dial
// (n from 1); set it before the pool dials.
type dialCounter struct {
	n      atomic.Int64
	before func(n int64)
}

func (d *dialCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	n := d.n.Add(1)
	if d.before != nil {
		d.before(n)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

// dials returns how many dials were made.
func (d *dialCounter) dials() int64 { return d.n.Load() }

// configAt returns a pool config for dsn's server reached at addr
// (host:port, a proxy in front of it or the server itself), without TLS,
// dialing through d when d is not nil.
func configAt(t *testing.T, dsn, addr string, d *dialCounter, extra string) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn + "&sslmode=disable" + extra)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	if d != nil {
		cfg.ConnConfig.DialFunc = d.dial
	}
	return cfg
}

// newHoldfast returns a factory with policy p and a retry budget of the
// test's own (retry.DefaultBudget, returned for its counters), plus opts.
func newHoldfast(t *testing.T, p retry.Policy, opts ...holdfast.Option) (*holdfast.Factory, *retry.Budget) {
	t.Helper()
	b, err := retry.NewBudget(retry.DefaultBudget())
	if err != nil {
		t.Fatal(err)
	}
	f, err := holdfast.New(append([]holdfast.Option{holdfast.WithRetryPolicy(p), holdfast.WithRetryBudget(b)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f, b
}

// holdfastPool configures cfg with f and builds the pool without
// connecting (NewPool would make the first connection); the test's
// cleanup closes it.
func holdfastPool(t *testing.T, f *holdfast.Factory, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	if err := f.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	return plainPool(t, cfg)
}

// plainPool builds a pool from cfg as it is: plain pgxpool, the control.
func plainPool(t *testing.T, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// ownServer starts a PostgreSQL server of the test's own, which it may
// stop, restart or freeze; the test's cleanup stops it.
func ownServer(t *testing.T, settings map[string]string) *pgtest.Server {
	t.Helper()
	if _, err := pgtest.BinDir(); err != nil {
		if os.Getenv(pgtest.EnvRequire) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := pgtest.Start(ctx, pgtest.Options{Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// pgCtl runs pg_ctl on s's data directory with args, as the OS user the
// server runs as (pgtest runs it as "postgres", or "nobody", when the tests
// run as root), and returns how long it took.
func pgCtl(t *testing.T, s *pgtest.Server, args ...string) time.Duration {
	t.Helper()
	bin, err := pgtest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	args = append([]string{"-D", filepath.Join(s.Dir, "data"), "-l", filepath.Join(s.Dir, "server.log")}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_ctl"), args...)
	cmd.Env = []string{"LC_ALL=C", "TZ=UTC", "PATH=" + os.Getenv("PATH"), "HOME=/tmp"}
	cmd.Dir = "/"
	cmd.WaitDelay = 5 * time.Second
	cred, err := pgtest.ServerUser() // nil unless root
	if err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	began := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return time.Since(began)
}

// postmasterPID returns the pid of s's postmaster.
func postmasterPID(t *testing.T, s *pgtest.Server) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

var tableSeq atomic.Int64

// tableName returns a table name no other test of this process uses.
func tableName(prefix string) string {
	return fmt.Sprintf("faults_%s_%d_%d", prefix, os.Getpid(), tableSeq.Add(1))
}

// within reports whether d is at most bound, for bounds that a loaded
// machine may stretch: the message names both.
func within(t *testing.T, what string, d, bound time.Duration) {
	t.Helper()
	if d > bound {
		t.Errorf("%s took %v, want within %v", what, d.Round(time.Millisecond), bound)
	}
}
