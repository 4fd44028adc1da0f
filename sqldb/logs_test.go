package sqldb_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/sqldb"
)

// A wrong password on the database/sql path: the fresh-password retry is
// logged (WARN, auth-failed-fresh-token), and so is its end: an ERROR
// line that says the fresh password was refused too, naming the target,
// with a hint. No line says "recovered".
func TestWrongPasswordIsLoggedWhenItGivesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a SCRAM server of its own: skipped with -short")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startScram(ctx, t)
	var logs fakes.LogBuffer
	f := newFactory(t, holdfast.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))),
		holdfast.WithPasswordFunc(func(context.Context, string) (string, error) { return "not-the-password", nil }))
	name := fmt.Sprintf("holdfast-sqldb-logs-%d", registered.Add(1))
	if err := sqldb.RegisterDriver(name, f); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open(name, fmt.Sprintf("postgres://%s@%s/postgres?sslmode=disable", scramUser, s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PingContext(ctx); err == nil {
		t.Fatal("a wrong password connected")
	}
	text := logs.String()
	host, _, _ := strings.Cut(s.Addr(), ":")
	var gaveUp string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, `"msg":"holdfast: giving up on a failure that is not retryable"`) {
			gaveUp = l
		}
	}
	for _, want := range []string{`"level":"ERROR"`, `"fresh_credential":true`, `"error.reason":"sqlstate-28P01"`,
		`"server.address":"` + host + `"`, `"db.namespace":"postgres"`, `"hint":"password authentication failed`} {
		if !strings.Contains(gaveUp, want) {
			t.Errorf("give-up line lacks %s: %q\nall lines:\n%s", want, gaveUp, text)
		}
	}
	if !strings.Contains(text, `"error.reason":"auth-failed-fresh-token"`) || strings.Contains(text, "holdfast: recovered") {
		t.Errorf("want the fresh-password retry line and no recovery:\n%s", text)
	}
	if strings.Contains(text, "not-the-password") {
		t.Errorf("the password is in the logs:\n%s", text)
	}
}
