package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
)

// TestConnectOrder pins what the connector assumes of pgconn's
// ConnectConfig (connect.go, the comment at its top), against the pgx
// version in go.mod: every entry (Host, then Fallbacks) is resolved before
// the first dial, with one LookupFunc call per entry that is not a Unix
// socket; the dials follow in entry order; after a failed dial pgconn
// goes on to the next; a 28P01 ends the connect; the error joins one line
// per dial, "address (host): cause".
func TestConnectOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []string
	record := func(s string) {
		mu.Lock()
		calls = append(calls, s)
		mu.Unlock()
	}
	cfg, err := pgconn.ParseConfig("host=a.test,/tmp/sock,b.test,c.test port=5432,5432,5433,5434 user=u dbname=db sslmode=disable connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) {
		record("lookup " + host)
		return []string{"10.0.0." + host[:1]}, nil
	}
	cfg.DialFunc = func(_ context.Context, network, addr string) (net.Conn, error) {
		record("dial " + addr)
		if strings.HasPrefix(addr, "10.0.0.b") {
			// A connection that fails its handshake with 28P01.
			client, server := net.Pipe()
			go func() {
				defer server.Close()
				buf := make([]byte, 1024)
				_, _ = server.Read(buf) // the startup message
				// ErrorResponse: S FATAL, C 28P01, M password.
				body := "SFATAL\x00C28P01\x00Mpassword authentication failed\x00\x00"
				msg := append([]byte{'E', 0, 0, 0, byte(4 + len(body))}, body...)
				_, _ = server.Write(msg)
			}()
			return client, nil
		}
		return nil, errors.New("refused")
	}
	_, err = pgconn.ConnectConfig(context.Background(), cfg)
	if err == nil {
		t.Fatal("connected")
	}
	want := []string{"lookup a.test", "lookup b.test", "lookup c.test",
		"dial 10.0.0.a:5432", "dial /tmp/sock/.s.PGSQL.5432", "dial 10.0.0.b:5433"}
	mu.Lock()
	got := fmt.Sprint(calls)
	mu.Unlock()
	if got != fmt.Sprint(want) {
		t.Errorf("pgconn's calls = %v\nwant %v (lookups first, one per non-socket entry; dials in order; none after 28P01)", got, want)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Errorf("err = %v, want the 28P01 reachable", err)
	}
	if line := regexp.MustCompile(`10\.0\.0\.a:5432 \(a\.test\): .*refused`); !line.MatchString(err.Error()) {
		t.Errorf("err = %q: want a line \"address (host): cause\" per dial", err)
	}
}

// A connection's error on a pool's own path (pgx's, which pgxpool returns
// unchanged) reads as what happened: a refused port is one line, as with
// plain pgxpool (the retry rounds that would never be dialed are left
// out); a handshake tried three times is a line per attempt and the line
// that ends the retries; the number of attempts is said once (in holdfast's
// clause, the same number as the log line), no line says an entry was not
// dialed, no host that does not exist, and one error.type for the whole
// failure.
func TestConnectErrorReadsAsWhatHappened(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		attempts int
		lines    int
		setup    func(t *testing.T) *pgxpool.Config
	}{
		{"refused port", 3, 1, func(t *testing.T) *pgxpool.Config {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			cfg, _ := poolConfig(t, "postgres://u@"+addr+"/db", "sslmode=disable")
			return cfg
		}},
		{"53300 on every attempt", 3, 5, func(t *testing.T) *pgxpool.Config {
			dsn := pgtest.DSN(t)
			refusedRole(t, dsn, "readable_errors")
			cfg, _ := poolConfig(t, dsn, "sslmode=disable", "user=readable_errors")
			return cfg
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs fakes.LogBuffer
			f := newFactory(t, holdfast.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			pool := newPool(t, f, tc.setup(t))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := pool.Ping(ctx)
			if err == nil {
				t.Fatal("connected")
			}
			text := err.Error()
			t.Logf("the error:\n%s\nthe log:\n%s", text, logs.String())
			if strings.Contains(text, "holdfast-retry-summary") {
				t.Errorf("the error names a host that does not exist")
			}
			counts := regexp.MustCompile(`(\d+) attempts?`).FindAllStringSubmatch(text, -1)
			if len(counts) != 1 || counts[0][1] != fmt.Sprint(tc.attempts) {
				t.Errorf("the error says the attempts %d times (%v), want once: %d", len(counts), counts, tc.attempts)
			}
			if n := strings.Count(text, "\n") + 1; n != tc.lines {
				t.Errorf("the error has %d lines, want %d", n, tc.lines)
			}
			if strings.Contains(text, "not dialed") {
				t.Errorf("a line says an entry was not dialed")
			}
			if n := strings.Count(logs.String(), `"msg":"holdfast: giving up after transient failures"`); n != 1 {
				t.Errorf("%d give-up lines, want 1", n)
			}
			if !strings.Contains(logs.String(), fmt.Sprintf(`"attempts":%d`, tc.attempts)) {
				t.Errorf("the log line does not say %d attempts", tc.attempts)
			}
			if strings.Contains(logs.String(), "holdfast: recovered") {
				t.Errorf("a line says recovered, and nothing recovered")
			}
			var re *retry.Error
			if !errors.As(err, &re) || re.Attempts != tc.attempts {
				t.Errorf("*retry.Error = %+v, want %d attempts", re, tc.attempts)
			}
		})
	}
}
