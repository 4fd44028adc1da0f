package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

func TestCredentialsFuncExclusive(t *testing.T) {
	creds := holdfast.WithIntegration(holdfast.Integration{Name: "rdssecrets", Credentials: func(context.Context, string) (holdfast.Credentials, error) {
		return holdfast.Credentials{}, nil
	}})
	pw := holdfast.WithPasswordFunc(func(context.Context, string) (string, error) { return "", nil })
	in := holdfast.WithIntegration(holdfast.Integration{Name: "x", Credentials: func(context.Context, string) (holdfast.Credentials, error) {
		return holdfast.Credentials{}, nil
	}})
	for name, opts := range map[string][]holdfast.Option{
		"credentials then password":    {creds, pw},
		"password then credentials":    {pw, creds},
		"credentials twice":            {creds, creds},
		"integration then credentials": {in, creds},
		"nil password":                 {holdfast.WithPasswordFunc(nil)},
		"integration with both": {holdfast.WithIntegration(holdfast.Integration{
			Password:    func(context.Context, string) (string, error) { return "", nil },
			Credentials: func(context.Context, string) (holdfast.Credentials, error) { return holdfast.Credentials{}, nil },
		})},
	} {
		_, err := holdfast.New(opts...)
		var ce *holdfast.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: err = %v, want a *ConfigError", name, err)
		}
	}
}

// TestCredentialsFuncRealPostgres: the user comes from the credentials; a
// refused password (28P01) makes one fresh call, told what was refused;
// later connects reuse the cached answer.
func TestCredentialsFuncRealPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("rotates credentials on a real server, waiting out their TTLs: skipped with -short")
	}
	if _, err := pgtest.BinDir(); err != nil {
		if os.Getenv(pgtest.EnvRequire) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop() }()
	const user, password = "cred_user", "cred-password-1"
	if err := s.PasswordRole(ctx, user, password); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	calls := 0
	var refused []holdfast.Credentials
	f, err := holdfast.New(holdfast.WithRetryPolicy(fastPolicy()), holdfast.WithIntegration(holdfast.Integration{Credentials: func(ctx context.Context, host string) (holdfast.Credentials, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if r, ok := holdfast.RefusedCredentials(ctx); ok {
			refused = append(refused, r)
		}
		pw := "stale-password"
		if calls > 1 {
			pw = password
		}
		return holdfast.Credentials{User: user, Password: pw, TTL: time.Hour}, nil
	}}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The config names another user, without a password.
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatalf("a stale password then the right one: %v", err)
	}
	defer pool.Close()
	for range 5 {
		pool.Reset()
		var got string
		if err := pool.QueryRow(ctx, "SELECT session_user").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != user {
			t.Fatalf("session_user = %s, want %s", got, user)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Fatalf("%d calls, want 2: one refused, one fresh, then cached", calls)
	}
	if len(refused) != 1 || refused[0].User != user || refused[0].Password != "stale-password" {
		t.Fatalf("RefusedCredentials: %v", refused)
	}
}

// TestCredentialsFormat: whatever the verb, the password never prints.
func TestCredentialsFormat(t *testing.T) {
	cr := holdfast.Credentials{User: "app", Password: "s3cret-pw", TTL: time.Second}
	want := `holdfast.Credentials{User: "app", Password: [REDACTED], TTL: 1s}`
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		if got := fmt.Sprintf(verb, cr); got != want {
			t.Errorf("Sprintf(%s) = %s, want %s", verb, got, want)
		}
	}
	if got := fmt.Sprint(&cr); got != want {
		t.Errorf("Sprint(&cr) = %s, want %s", got, want)
	}
}
