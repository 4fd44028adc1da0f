package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestService runs the example briefly, in-process, on a throwaway server
// with its default incident (the server refusing the service's role with
// 53300 at startup and when the pool grows), and checks that the output
// carries the telemetry an operator needs: the standard pool metrics,
// holdfast's retry metrics by stage and reason, the connect spans with
// their attempt events, and the retry log lines.
func TestService(t *testing.T) {
	if _, err := pgtest.BinDir(); errors.Is(err, pgtest.ErrNotFound) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, options{requests: 4}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		// metrics (stdoutmetric JSON)
		`"Name":"db.client.connection.count"`,
		`"Name":"db.client.connection.wait_time"`,
		`"Name":"db.client.connection.use_time"`,
		`"Name":"db.client.connection.create_time"`,
		`"Name":"db.client.operation.duration"`,
		`"Name":"holdfast.connect.attempts"`,
		`"Name":"holdfast.retries"`,
		`"Name":"holdfast.recoveries"`,
		`"Value":"startup"`,
		`"Value":"pool-growth"`,
		`"Value":"sqlstate-53300"`,
		`"Value":"widget-service"`,
		// spans (stdouttrace JSON)
		`"Name":"holdfast.connect"`,
		`"Name":"holdfast.startup"`,
		`"Name":"GET /widget"`,
		`"Name":"holdfast.attempt"`,
		// logs
		`"msg":"holdfast: retrying after a transient failure"`,
		`"holdfast.stage":"pool-growth"`,
		`"msg":"request served","status":200`,
		`"msg":"database: DATABASE_URL is not set, started a throwaway PostgreSQL"`,
		`"msg":"incident: the server refuses the service's new connections"`,
		`"msg":"incident: holdfast retried; the server accepts the service's connections again"`,
		// the server's own error, not a fake's
		`too many connections for role \"widget\"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %s", want)
		}
	}
	if strings.Contains(text, `"status":503`) {
		t.Errorf("a request failed although holdfast should absorb the refusals")
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}
