package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// A password function that panics costs the connection, not the process:
// the panic is recovered into an error that names it, classified Fatal
// "panic" (not retried), and logged at ERROR with its stack.
func TestPasswordFuncPanic(t *testing.T) {
	t.Parallel()
	cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	var calls atomic.Int64
	var logs syncBuffer
	f := newFactory(t,
		holdfast.WithPasswordFunc(func(context.Context, string) (string, error) {
			calls.Add(1)
			panic("token SDK bug")
		}),
		holdfast.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	pool := newPool(t, f, cfg)
	err := pool.Ping(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the password function panicked with a string") || strings.Contains(err.Error(), "token SDK bug") {
		t.Fatalf("Ping = %v, want the panic's error naming its type, not its value", err)
	}
	if v := f.Classify(err); v.Retryable() || v.Reason != classify.ReasonPanic {
		t.Errorf("Classify = %v, want fatal/panic", v)
	}
	if calls.Load() != 1 {
		t.Errorf("password func called %d times, want 1 (a panic is not retried)", calls.Load())
	}
	if s := logs.String(); !strings.Contains(s, "level=ERROR") || !strings.Contains(s, "password function panicked") ||
		!strings.Contains(s, "safety_test.go") || !strings.Contains(s, "panic=string") || strings.Contains(s, "token SDK bug") {
		t.Errorf("want an ERROR line with the panic's type and the stack, not its value:\n%s", s)
	}
}

// An error holdfast returns carries no secret it knows, even when the
// cause echoes it (a proxy or token endpoint that prints the token and the
// password): the text is redacted, and errors.Is/As still reach the cause.
func TestReturnedErrorsCarryNoSecret(t *testing.T) {
	t.Parallel()
	const password, token = "pw-Sup3rSecret-42", "tok-eyJhbGciOi-77"
	cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable", "password="+password)
	cfg.ConnConfig.DialFunc = func(_ context.Context, _, addr string) (net.Conn, error) {
		return nil, fmt.Errorf("proxy refused session token=%s pw=%s: %w", token, password, syscall.ECONNRESET)
	}
	tokens := 0
	f := newFactory(t, holdfast.WithPasswordFunc(func(context.Context, string) (string, error) {
		tokens++
		return token, nil
	}))
	pool := newPool(t, f, cfg)
	for name, err := range map[string]error{
		"Factory.Acquire": func() error { _, err := f.Acquire(context.Background(), pool); return err }(),
		"pool.Ping":       pool.Ping(context.Background()),
	} {
		if err == nil {
			t.Fatalf("%s succeeded through a failing dial", name)
		}
		if s := err.Error(); strings.Contains(s, password) || strings.Contains(s, token) {
			t.Errorf("%s: the error text carries a secret: %s", name, s)
		}
		if !strings.Contains(err.Error(), "proxy refused session") {
			t.Errorf("%s: the error text is gone altogether: %s", name, err)
		}
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s: errors.Is does not reach the cause: %v", name, err)
		}
	}
}

// A password function that mints a token per connection does not push the
// configured password out of what holdfast redacts (issue 34: after 20
// tokens the DSN's password appeared in a returned error and a log line).
func TestConfiguredPasswordOutlivesMintedTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const password = "pw-DsnConfigured-91"
	cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable", "password="+password)
	cfg.MaxConns = 1
	var fail atomic.Bool
	dialer := &net.Dialer{}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if fail.Load() {
			return nil, fmt.Errorf("proxy: login app/%s refused: %w", password, syscall.ECONNRESET)
		}
		return dialer.DialContext(ctx, network, addr)
	}
	var minted atomic.Int64
	var logs syncBuffer
	f := newFactory(t, holdfast.WithPasswordFunc(func(context.Context, string) (string, error) {
		return fmt.Sprintf("tok-%04d-minted", minted.Add(1)), nil
	}), holdfast.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	t.Cleanup(f.Close) // its outage prober, started by the refusals below, ends with it
	pool := newPool(t, f, cfg)
	for range 40 { // 40 connections, one token each
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Conn().Close(ctx) // destroyed at Release: the next Acquire connects anew
		c.Release()
	}
	if minted.Load() < 40 {
		t.Fatalf("%d tokens minted, want 40", minted.Load())
	}
	fail.Store(true)
	err := pool.Ping(ctx)
	if err == nil || !strings.Contains(err.Error(), "proxy: login app/") {
		t.Fatalf("Ping = %v, want the proxy's refusal", err)
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("after %d minted tokens the configured password is in the error: %s", minted.Load(), err)
	}
	if strings.Contains(logs.String(), password) {
		t.Errorf("after %d minted tokens the configured password is in a log line:\n%s", minted.Load(), logs.String())
	}
}
