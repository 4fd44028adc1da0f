package pgtest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestTrap: the trap counts each attempt and records the password pgx
// sends, in cleartext and through sslmode=verify-full for a name of its
// certificate once its CA is trusted; a client that does not trust the CA
// sends nothing.
func TestTrap(t *testing.T) {
	t.Parallel()
	const name = "mydb-2.attacker.example"
	trap, err := StartTrap(TrapConfig{Names: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := trap.Close(); err != nil {
			t.Error(err)
		}
	}()
	_, port, _ := net.SplitHostPort(trap.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	connect := func(dsn string, trust bool) error {
		cc, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cc.LookupFunc = func(context.Context, string) ([]string, error) { return []string{"127.0.0.1"}, nil }
		if trust {
			trap.Trust(cc)
		}
		c, err := pgx.ConnectConfig(ctx, cc)
		if err == nil {
			c.Close(ctx)
		}
		return err
	}
	var pe *pgconn.PgError
	if err := connect("postgres://app:plain-pw@"+name+":"+port+"/db?sslmode=disable", false); !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Fatalf("plain connect: %v, want 28P01", err)
	}
	if err := connect("postgres://app:tls-pw@"+name+":"+port+"/db?sslmode=verify-full", true); !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Fatalf("verify-full connect, CA trusted: %v, want 28P01", err)
	}
	if err := connect("postgres://app:never-sent@"+name+":"+port+"/db?sslmode=verify-full", false); err == nil || errors.As(err, &pe) {
		t.Fatalf("verify-full connect, CA not trusted: %v, want a certificate error", err)
	}
	if n := trap.Attempts(); n != 3 {
		t.Errorf("Attempts = %d, want 3", n)
	}
	logins := trap.Logins()
	want := []Login{{User: "app", Database: "db", Password: "plain-pw"},
		{User: "app", Database: "db", Password: "tls-pw", TLS: true, ServerName: name}}
	if len(logins) != len(want) || logins[0] != want[0] || logins[1] != want[1] {
		t.Errorf("Logins = %+v, want %+v", logins, want)
	}
}
