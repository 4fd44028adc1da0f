package holdfast_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
)

// Distinctive secrets: a static password in the DSN and an IAM token from
// the password function.
const (
	secretPassword = "Pw-HOLDFAST-SECRET-6f1c9e"
	secretToken    = "IAM-TOKEN-HOLDFAST-SECRET-2b7d41"
)

// withPassword puts secretPassword into a pgtest DSN
// (postgres://postgres@host:port/...). The test server trusts loopback, so
// the password is never checked, but pgx holds it in its config.
func withPassword(t *testing.T, dsn string) string {
	t.Helper()
	const user = "postgres://postgres@"
	if !strings.HasPrefix(dsn, user) {
		t.Skipf("DSN %q is not of the pgtest form", "postgres://…")
	}
	return "postgres://postgres:" + secretPassword + "@" + strings.TrimPrefix(dsn, user)
}

// The telemetry scenarios (resets, a permission failure, an exhausted
// retry, a budget rejection), an authentication failure and a failed
// startup, run with a distinctive password and IAM token: neither may
// appear in any log line, span (name, attribute, event, status), metric
// attribute or returned error.
func TestTelemetryNoSecretsAnywhere(t *testing.T) {
	dsn := withPassword(t, pgtest.DSN(t))
	rig := newRig(t)
	var errs []error
	var tokens int

	tests := []struct {
		name    string
		dial    []fakes.Step
		token   []fakes.Step
		extra   []string
		budget  *retry.BudgetConfig
		newPool bool // through NewPool (startup) instead of Factory.Acquire
	}{
		{name: "reset then success at the dial", dial: []fakes.Step{fakes.Fail(resetErr()), fakes.Connect()}},
		{name: "reset then success at the token endpoint", token: []fakes.Step{fakes.Fail(resetErr()), fakes.Connect()}},
		{name: "permission failure", dial: []fakes.Step{fakes.Fail(deniedErr()).Forever()}},
		{name: "exhausted retry", dial: []fakes.Step{fakes.Refused().Forever()}},
		{name: "budget rejection", dial: []fakes.Step{fakes.Refused().Forever()}, budget: &retry.BudgetConfig{Capacity: 1, RetryCost: 1}},
		{name: "authentication failure with a fresh token", extra: []string{"user=no_such_role"}},
		{name: "startup failure", dial: []fakes.Step{fakes.Refused().Forever()}, newPool: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, addr := poolConfig(t, dsn, append([]string{"sslmode=disable"}, tt.extra...)...)
			if cfg.ConnConfig.Password != secretPassword {
				t.Fatalf("the DSN's password did not reach the config")
			}
			cfg.ConnConfig.DialFunc = fakes.NewConnector(addr, tt.dial...).Dial
			src := fakes.NewPasswordSource(secretToken, tt.token...)
			opts := append(rig.options(), holdfast.WithPasswordFunc(src.Password))
			if tt.budget != nil {
				b, err := retry.NewBudget(*tt.budget)
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, holdfast.WithRetryBudget(b))
			}
			f := newFactory(t, opts...)
			if tt.newPool {
				pool, err := f.NewPool(context.Background(), cfg)
				if err == nil {
					pool.Close()
					t.Fatal("NewPool succeeded through refused dials")
				}
				errs = append(errs, err)
				tokens += src.Successes()
				return
			}
			pool := newPool(t, f, cfg)
			c, err := f.Acquire(context.Background(), pool)
			if err == nil {
				var n int
				err = c.QueryRow(context.Background(), "SELECT 1").Scan(&n)
				c.Release()
			}
			if err != nil {
				errs = append(errs, err)
			}
			if err := pool.Ping(context.Background()); err != nil {
				errs = append(errs, err)
			}
			tokens += src.Successes()
		})
	}

	// The test can fail: the secrets were in play, and there is text to
	// search.
	if tokens == 0 || len(errs) < 5 || len(rig.logs.lines("holdfast: retrying after a transient failure")) < 4 || len(rig.spans.Ended()) < 7 {
		t.Fatalf("scenarios too quiet: %d tokens fetched, %d errors, logs:\n%s", tokens, len(errs), rig.logs.String())
	}
	var spans strings.Builder
	for _, s := range rig.spans.Ended() {
		spans.WriteString(spanText(s))
	}
	var errText strings.Builder
	for _, err := range errs {
		fmt.Fprintf(&errText, "%v\n%+v\n%s\n", err, err, err.Error())
	}
	for what, text := range map[string]string{
		"log lines":         rig.logs.String(),
		"spans":             spans.String(),
		"metric attributes": rig.attributeText(t),
		"returned errors":   errText.String(),
	} {
		if text == "" {
			t.Errorf("no %s to search", what)
		}
		for _, secret := range []string{secretPassword, secretToken} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contain the secret %q:\n%s", what, secret, text)
			}
		}
	}
}

// A dialer that puts secrets into its error text (a bad SDK, a DSN in a
// message) does not leak them into holdfast's log lines: the configured
// password and the fetched token are redacted wherever they appear, and so
// is any connection-string password.
func TestTelemetryLogsRedactSecrets(t *testing.T) {
	t.Parallel()
	dsn := withPassword(t, pgtest.DSN(t))
	for _, active := range []bool{true, false} {
		t.Run(fmt.Sprintf("telemetry active %v", active), func(t *testing.T) {
			t.Parallel()
			rig := newRig(t)
			cfg, _ := poolConfig(t, dsn, "sslmode=disable")
			cfg.ConnConfig.DialFunc = func(_ context.Context, _, addr string) (net.Conn, error) {
				return nil, fmt.Errorf("leaky dialer: %s with %s and %s, dsn postgres://u:dsn-url-pass-91@h/db, password=dsn-kv-pass-37: %w",
					addr, secretPassword, secretToken, syscall.ECONNREFUSED)
			}
			src := fakes.NewPasswordSource(secretToken)
			opts := []holdfast.Option{holdfast.WithPasswordFunc(src.Password), rig.options()[2]} // the logger
			if active {
				opts = rig.options()[:2]
				opts = append(opts, holdfast.WithPasswordFunc(src.Password), rig.options()[2])
			}
			f := newFactory(t, opts...)
			pool := newPool(t, f, cfg)
			if _, err := f.Acquire(context.Background(), pool); err == nil {
				t.Fatal("Acquire succeeded through the leaky dialer")
			}
			logs := rig.logs.String()
			// One retry line (the second retry of the same reason within a
			// second is sampled away) and the give-up line, both redacted.
			if len(rig.logs.lines("holdfast: retrying after a transient failure")) != 1 ||
				len(rig.logs.lines("holdfast: giving up after transient failures")) != 1 || !strings.Contains(logs, "[redacted]") {
				t.Fatalf("want one retry line and one give-up line with redactions, got:\n%s", logs)
			}
			for _, secret := range []string{secretPassword, secretToken, "dsn-url-pass-91", "dsn-kv-pass-37"} {
				if strings.Contains(logs, secret) {
					t.Errorf("log lines contain %q:\n%s", secret, logs)
				}
			}
			if !strings.Contains(logs, "leaky dialer") {
				t.Errorf("the error text is gone altogether:\n%s", logs)
			}
		})
	}
}
