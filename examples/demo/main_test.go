package main

import (
	"bytes"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestDemo runs the README's first command in-process, with no
// DATABASE_URL, and checks the story it tells: plain pgxpool fails on the
// 503, holdfast absorbs it with one connection, real mistakes fail after one
// attempt.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo: skipped with -short")
	}
	if _, err := pgtest.BinDir(); errors.Is(err, pgtest.ErrNotFound) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skip(err)
	}
	checkStory(t, "", "database: a throwaway PostgreSQL on 127.0.0.1:")
}

// With DATABASE_URL, the demo tells the same story against that server,
// even with a host name that may resolve to two addresses and the default
// sslmode (prefer), each of which would add a dial per connect if the demo
// did not pin one.
func TestDemoWithDatabaseURL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo: skipped with -short")
	}
	dsn := pgtest.DSN(t)
	if os.Getenv(pgtest.EnvDSN) == "" { // the harness's server: 127.0.0.1, sslmode=disable
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Host, u.RawQuery = net.JoinHostPort("localhost", u.Port()), ""
		dsn = u.String()
	}
	checkStory(t, dsn, "database: DATABASE_URL")
}

func checkStory(t *testing.T, dsn, database string) {
	t.Helper()
	var out bytes.Buffer
	if err := run(&out, dsn); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		database,
		"request: FAILED (transient/token-fetch-503)",
		"request: OK",
		"dial attempts: 2, connections created: 1",
		"holdfast.layer=connect attempt=1",
		"fatal/permission-denied after 1 dial attempt(s)",
		"fatal/sqlstate-28000 after 1 dial attempt(s)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}
