package cloudsql_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/cloudsqlconn"
	"cloud.google.com/go/cloudsqlconn/errtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/cloudsql"
	"github.com/holdfast-db/holdfast/fakes"
	fake "github.com/holdfast-db/holdfast/fakes/cloudsqltest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
	"github.com/holdfast-db/holdfast/retry"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The end-to-end tests below run the real cloudsqlconn dialer of go.mod
// against the fake Cloud SQL of fakes/cloudsqltest, which forwards to a real
// PostgreSQL, through a pgxpool configured by a holdfast Factory built
// with the cloudsql integration (cloudsql.With). Each logs how long its case
// took; the README's table comes from these logs.

// env is one pool through the real dialer and the fake.
type env struct {
	fake  *fake.Server
	d     *cloudsqlconn.Dialer
	f     *holdfast.Factory
	pool  *pgxpool.Pool
	dials atomic.Int32 // calls of the dial function holdfast wraps: d.Dial
	logs  *fakes.LogBuffer
}

type envOpts struct {
	cfg      fake.Config
	iam      bool
	instance string                // default the fake's connection name
	dialer   []cloudsqlconn.Option // appended to the fake's options
	holdfast []holdfast.Option     // appended to the cloudsql integration
	dsnExtra string                // appended to the DSN's query
}

// newEnv starts a fake, a real dialer and a pool configured the documented
// way: holdfast.New(cloudsql.With(d, instance)) (here its Integration, with
// the dial counted), then Factory.Configure. The pool connects to
// PostgreSQL's "postgres" database as "postgres"; its DSN keeps pgx's
// default sslmode (prefer), which Configure must neutralise.
func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	if o.cfg.Backend == "" {
		o.cfg.Backend = pgtest.Addr(t)
	}
	s, err := fake.New(o.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	opts, err := s.DialerOptions()
	if o.iam {
		opts, err = s.IAMDialerOptions()
	}
	if err != nil {
		t.Fatal(err)
	}
	d, err := cloudsqlconn.NewDialer(context.Background(), append(opts, o.dialer...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })

	e := &env{fake: s, d: d, logs: &fakes.LogBuffer{}}
	instance := o.instance
	if instance == "" {
		instance = s.ConnName()
	}
	in := gcptest.Counted(cloudsql.Integration(d, instance), &e.dials)
	e.f = gcptest.NewFactory(t, e.logs, append([]holdfast.Option{holdfast.WithIntegration(in)}, o.holdfast...)...)
	e.pool = gcptest.Pool(t, e.f, gcptest.Parse(t, "host=localhost user=postgres dbname=postgres "+o.dsnExtra))
	return e
}

// verdictOf returns the factory's classification of err and the
// *retry.Error holdfast's dial layer returned, if any.
func (e *env) verdictOf(t *testing.T, err error) (classify.Verdict, *retry.Error) {
	t.Helper()
	var re *retry.Error
	errors.As(err, &re)
	return e.f.Classify(err), re
}

// TestIAMTokenFetch503Once is the incident this library was built for: the
// IAM login token fetch of the real dialer gets a 503 once. The pool's Ping
// succeeds with exactly one connection created and one holdfast retry.
func TestIAMTokenFetch503Once(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{iam: true})
	e.fake.Fail(fake.LoginToken, 503, 1)

	start := time.Now()
	if err := e.pool.Ping(gcptest.CtxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Ping = %v, want success after one retried token 503", err)
	}
	gcptest.Measured(t, start)
	if got := e.pool.Stat().NewConnsCount(); got != 1 {
		t.Errorf("NewConnsCount = %d, want exactly 1", got)
	}
	if got := e.dials.Load(); got != 2 {
		t.Errorf("dials = %d, want 2 (the 503, then success)", got)
	}
	st := e.fake.Stats()
	if st.Failed != 1 || st.Forwarded != 1 || st.LoginCerts < 1 {
		t.Errorf("fake stats = %+v; want 1 injected failure, 1 forwarded connection, an IAM login cert", st)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "error.reason=token-fetch-503") || !strings.Contains(logs, "holdfast.layer=connect") {
		t.Errorf("holdfast did not log the retried token-fetch-503 at the connect layer:\n%s", logs)
	}
	if strings.Contains(logs, "fake-login-") || strings.Contains(logs, "fake-api-") {
		t.Errorf("a token appears in the logs:\n%s", logs)
	}
}

// TestAPITokenFetch503Once: the Admin API token fetch fails once (the
// request never reaches the Admin API); one holdfast retry recovers.
func TestAPITokenFetch503Once(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.Fail(fake.APIToken, 503, 1)
	start := time.Now()
	if err := e.pool.Ping(gcptest.CtxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	gcptest.Measured(t, start)
	st := e.fake.Stats()
	got, n := e.dials.Load(), e.pool.Stat().NewConnsCount()
	switch {
	case st.Failed != 1 || n != 1:
		t.Errorf("503s served = %d, connections = %d; want 1 and 1", st.Failed, n)
	case got == 1:
		// Seen once on a loaded machine: the connector's two Admin API
		// calls share one token fetch, and the call that got the 503 was
		// not the one the refresh waited for. Nothing for holdfast to do.
		t.Logf("the connector absorbed the 503 inside one dial: %+v", st)
	case got != 2:
		t.Errorf("dials = %d, want 2 (the failed refresh and one holdfast retry)", got)
	}
}

// TestAdminAPI503WithinConnectorRetry: three 503s are absorbed by the
// connector's own retry inside one Dial; holdfast adds nothing.
func TestAdminAPI503WithinConnectorRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the Cloud SQL connector's own Admin API retry (seconds): skipped with -short")
	}
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.Fail(fake.ConnectSettings, 503, 3)
	start := time.Now()
	if err := e.pool.Ping(gcptest.CtxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	gcptest.Measured(t, start)
	if got := e.dials.Load(); got != 1 {
		t.Errorf("dials = %d, want 1: the connector absorbed the 503s, holdfast must not retry", got)
	}
	if st := e.fake.Stats(); st.ConnectSettings < 4 {
		t.Errorf("connectSettings calls = %d, want at least 4 (3 failures, then success)", st.ConnectSettings)
	}
}

// TestAdminAPI503OutlastsConnector: five 503s exhaust the connector's own
// retry (5 tries); holdfast's one retry runs another connector cycle, which
// succeeds.
func TestAdminAPI503OutlastsConnector(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the Cloud SQL connector's own Admin API retry (seconds): skipped with -short")
	}
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.Fail(fake.ConnectSettings, 503, 5)
	start := time.Now()
	if err := e.pool.Ping(gcptest.CtxFor(t, 60*time.Second)); err != nil {
		t.Fatalf("Ping = %v, want success on holdfast's retry", err)
	}
	took := time.Since(start)
	gcptest.Measured(t, start)
	if got := e.dials.Load(); got != 2 {
		t.Errorf("dials = %d, want 2", got)
	}
	if got := e.pool.Stat().NewConnsCount(); got != 1 {
		t.Errorf("NewConnsCount = %d, want 1", got)
	}
	if took < 5*time.Second {
		t.Errorf("took %v; the connector's 5 tries alone wait at least 5.3s: was its retry cut short?", took)
	}
	if !strings.Contains(e.logs.String(), "error.reason=admin-api-503") {
		t.Errorf("holdfast did not log the admin-api-503 retry:\n%s", e.logs.String())
	}
}

// TestAdminAPI503OutlastsHoldfast: the Admin API answers 503 for longer
// than holdfast's policy allows. The Ping fails after two connector cycles
// with a clear, classified error: Transient admin-api-503, attempts
// exhausted.
func TestAdminAPI503OutlastsHoldfast(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the Cloud SQL connector's own Admin API retry (seconds): skipped with -short")
	}
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.Fail(fake.ConnectSettings, 503, -1)
	start := time.Now()
	err := e.pool.Ping(gcptest.CtxFor(t, 60*time.Second))
	took := time.Since(start)
	gcptest.Measured(t, start)
	if err == nil {
		t.Fatal("Ping succeeded during an endless Admin API outage")
	}
	v, re := e.verdictOf(t, err)
	if v != (classify.Verdict{Class: classify.Transient, Reason: "admin-api-503"}) {
		t.Errorf("verdict = %v, want transient/admin-api-503", v)
	}
	if re == nil || re.Attempts != 2 || re.Stop != retry.StopExhausted || !re.Retryable() {
		t.Fatalf("retry error = %+v; want 2 attempts, attempts exhausted, retryable later", re)
	}
	var ce *holdfast.ConnectError
	var ge *googleapi.Error
	if !errors.As(err, &ce) || ce.Layer != "connect" || !errors.As(err, &ge) || ge.Code != 503 {
		t.Errorf("err = %v; want a holdfast ConnectError at the connect layer wrapping googleapi.Error{503}", err)
	}
	if !errors.Is(err, retry.ErrExhausted) {
		t.Errorf("errors.Is(err, retry.ErrExhausted) = false")
	}
	if got := e.dials.Load(); got != 2 {
		t.Errorf("dials = %d, want 2 (one holdfast retry, not more)", got)
	}
	// Two connector cycles of five tries: 10 calls. The connector may start
	// one background refresh before it evicts a failed cache entry, so
	// allow a few more, but never a third full cycle.
	if st := e.fake.Stats(); st.ConnectSettings < 10 || st.ConnectSettings > 14 {
		t.Errorf("connectSettings calls = %d, want 10 (two connector cycles), at most 14", st.ConnectSettings)
	}
	p := cloudsql.RetryPolicy()
	if took < 2*5*time.Second || took > p.MaxElapsed {
		t.Errorf("took %v; want two full connector cycles (>10s) and less than MaxElapsed %v", took, p.MaxElapsed)
	}
}

// TestFatalFailuresFailAtOnce: permission denied, a missing instance, a
// malformed instance name, a closed dialer and server identity failures
// make exactly one attempt and fail at once with a Fatal verdict.
func TestFatalFailuresFailAtOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		o          envOpts
		inject     func(e *env)
		wantReason string
		wantAdmin  int // connectSettings calls, -1 to skip the check
	}{
		{"connectSettings 403", envOpts{}, func(e *env) { e.fake.Fail(fake.ConnectSettings, 403, -1) }, "permission-denied", -1},
		{"connectSettings 404", envOpts{}, func(e *env) { e.fake.Fail(fake.ConnectSettings, 404, -1) }, "instance-not-found", -1},
		{"instance that does not exist", envOpts{instance: fake.DefaultProject + ":" + fake.DefaultRegion + ":nope"}, nil, "instance-not-found", -1},
		{"malformed instance name", envOpts{instance: fake.DefaultProject + ":" + fake.DefaultInstance}, nil, "cloudsql-config", 0},
		{"region mismatch", envOpts{instance: fake.DefaultProject + ":us-elsewhere1:" + fake.DefaultInstance}, nil, "cloudsql-config", -1},
		{"IAM login token 401", envOpts{iam: true}, func(e *env) { e.fake.Fail(fake.LoginToken, 401, -1) }, "token-denied", -1},
		{"IAM login token invalid_grant", envOpts{iam: true}, func(e *env) { e.fake.Fail(fake.LoginToken, 400, -1) }, "token-invalid-grant", -1},
		{"untrusted server certificate", envOpts{cfg: fake.Config{UntrustedServerCert: true}}, nil, "tls-verification", -1},
		{"server certificate for another instance", envOpts{cfg: fake.Config{ServerCN: "other-project:other-instance"}}, nil, "tls-verification", -1},
		{"dialer closed", envOpts{}, func(e *env) { _ = e.d.Close() }, "dialer-closed", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tt.o)
			if tt.inject != nil {
				tt.inject(e)
			}
			start := time.Now()
			err := e.pool.Ping(gcptest.CtxFor(t, 30*time.Second))
			gcptest.Measured(t, start)
			if err == nil {
				t.Fatal("Ping succeeded")
			}
			v, re := e.verdictOf(t, err)
			if v.Class != classify.Fatal || v.Reason != tt.wantReason {
				t.Errorf("verdict = %v, want fatal/%s (err: %v)", v, tt.wantReason, err)
			}
			if re == nil || re.Attempts != 1 || re.Stop != retry.StopFatal {
				t.Errorf("retry error = %+v, want one attempt stopped as fatal", re)
			}
			if got := e.dials.Load(); got != 1 {
				t.Errorf("dials = %d, want exactly 1", got)
			}
			if got := e.fake.Stats().ConnectSettings; tt.wantAdmin >= 0 && got != tt.wantAdmin {
				t.Errorf("connectSettings calls = %d, want %d", got, tt.wantAdmin)
			}
			if strings.Contains(e.logs.String(), "retrying") {
				t.Errorf("holdfast logged a retry of a fatal failure:\n%s", e.logs.String())
			}
		})
	}
}

// TestInstanceNetworkFailuresAreRetried: the instance refuses the TCP
// connection, or resets it in the middle of the TLS handshake, once; the
// dial is retried and the Ping succeeds.
func TestInstanceNetworkFailuresAreRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		inject func(s *fake.Server)
		reason string
	}{
		{"reset mid-handshake", func(s *fake.Server) { s.ResetHandshake(1) }, "conn-reset"},
		{"refused", func(s *fake.Server) { s.Refuse(1) }, "conn-refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOpts{})
			tt.inject(e.fake)
			start := time.Now()
			if err := e.pool.Ping(gcptest.CtxFor(t, 30*time.Second)); err != nil {
				t.Fatalf("Ping = %v", err)
			}
			gcptest.Measured(t, start)
			if got, n := e.dials.Load(), e.pool.Stat().NewConnsCount(); got != 2 || n != 1 {
				t.Errorf("dials = %d, connections = %d; want 2 and 1", got, n)
			}
			if !strings.Contains(e.logs.String(), "error.reason="+tt.reason) {
				t.Errorf("holdfast did not log a %s retry:\n%s", tt.reason, e.logs.String())
			}
		})
	}
}

// TestResetAfterHandshakeIsRetried: the TLS handshake completes, then the
// instance resets the connection during PostgreSQL's startup. The dial
// succeeded; the connect sees the reset and retries it on a new dial, so
// even a plain pool.Ping succeeds.
func TestResetAfterHandshakeIsRetried(t *testing.T) {
	if testing.Short() {
		t.Skip("resets real connections after the handshake: skipped with -short")
	}
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.ResetAfterHandshake(1)
	ctx := gcptest.CtxFor(t, 30*time.Second)
	start := time.Now()
	if err := e.pool.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	gcptest.Measured(t, start)
	if got := e.dials.Load(); got != 2 {
		t.Errorf("dials = %d, want 2", got)
	}
	if st := e.fake.Stats(); st.Resets != 1 || st.Forwarded != 1 {
		t.Errorf("fake stats = %+v; want 1 reset, 1 forwarded", st)
	}
	if !strings.Contains(e.logs.String(), "holdfast.layer=connect") || !strings.Contains(e.logs.String(), "error.reason=conn-reset") {
		t.Errorf("holdfast did not log a connect-layer retry of the reset:\n%s", e.logs.String())
	}
}

// TestHungAdminAPIIsCutByDialTimeout: an Admin API call that never answers
// holds the first dial until Configure's DialTimeout (12s) ends it; the
// holdfast retry then connects. (holdfast's own AttemptTimeout does not
// bound the first dial of a connection.)
func TestHungAdminAPIIsCutByDialTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a real dial timeout: skipped with -short")
	}
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.Slow(fake.ConnectSettings, time.Hour, 1)
	start := time.Now()
	if err := e.pool.Ping(gcptest.CtxFor(t, 60*time.Second)); err != nil {
		t.Fatalf("Ping = %v\nstats %+v dials %d\nlogs:\n%s", err, e.fake.Stats(), e.dials.Load(), e.logs.String())
	}
	took := time.Since(start)
	gcptest.Measured(t, start)
	if got := e.dials.Load(); got != 2 {
		t.Errorf("dials = %d, want 2", got)
	}
	if took < cloudsql.DialTimeout {
		t.Errorf("took %v, less than DialTimeout %v: what cut the hung call?", took, cloudsql.DialTimeout)
	}
	if !strings.Contains(e.logs.String(), "error.reason=timeout") {
		t.Errorf("holdfast did not log a timeout retry:\n%s", e.logs.String())
	}
}

// TestNewPoolStartup: NewPool with the Cloud SQL options makes the first
// connection through a token 503, and reports a Fatal StartupError at once
// for a permission error.
func TestNewPoolStartup(t *testing.T) {
	t.Parallel()
	t.Run("token 503 once", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{iam: true})
		e.fake.Fail(fake.LoginToken, 503, 1)
		if err := e.f.Start(gcptest.CtxFor(t, 60*time.Second), e.pool); err != nil {
			t.Fatalf("Start = %v", err)
		}
		if got := e.pool.Stat().NewConnsCount(); got != 1 {
			t.Errorf("NewConnsCount = %d, want 1", got)
		}
	})
	t.Run("403", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		e.fake.Fail(fake.ConnectSettings, 403, -1)
		start := time.Now()
		err := e.f.Start(gcptest.CtxFor(t, 60*time.Second), e.pool)
		gcptest.Measured(t, start)
		var ce *holdfast.ConnectError
		if v := e.f.Classify(err); !errors.As(err, &ce) || ce.Layer != "startup" || v.Class != classify.Fatal || v.Reason != "permission-denied" {
			t.Fatalf("Start = %v; want a fatal permission-denied ConnectError of layer startup", err)
		}
		if got := e.dials.Load(); got != 1 {
			t.Errorf("dials = %d, want 1", got)
		}
	})
}

// TestConfigureDialsOncePerConnect: with pgx's default sslmode=prefer and a
// host name, pgx would dial twice per failed connect (TLS, then plain) and
// once per resolved address; after Configure it dials once.
func TestConfigureDialsOncePerConnect(t *testing.T) {
	t.Parallel()
	for _, extra := range []string{"", "sslmode=prefer", "sslmode=require", "host=localhost,127.0.0.1"} {
		t.Run("dsn "+extra, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOpts{dsnExtra: extra})
			e.fake.Fail(fake.ConnectSettings, 403, -1)
			if err := e.pool.Ping(gcptest.CtxFor(t, 30*time.Second)); err == nil {
				t.Fatal("Ping succeeded")
			}
			if got := e.dials.Load(); got != 1 {
				t.Errorf("dials = %d, want 1", got)
			}
		})
	}
}

// TestClassifierSeesRealChains checks the connector's raw Dial errors,
// without holdfast's wrapping, against the classification the README
// promises.
func TestClassifierSeesRealChains(t *testing.T) {
	t.Parallel()
	c := classify.New(cloudsql.Rules()...).WithTypes(cloudsql.TypeRules()...)
	typesOnly := classify.New().WithTypes(cloudsql.TypeRules()...)
	e := newEnv(t, envOpts{cfg: fake.Config{ServerCN: "wrong:cn"}})
	_, err := e.d.Dial(gcptest.CtxFor(t, 30*time.Second), e.fake.ConnName())
	var de *errtype.DialError
	if !errors.As(err, &de) {
		t.Fatalf("Dial = %v, want a DialError", err)
	}
	if got := c.Classify(err); got != (classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonTLS}) {
		t.Errorf("with cloudsql.Rules: %v, want fatal/tls-verification", got)
	}
	if got := typesOnly.Classify(err); got != (classify.Verdict{Class: classify.Transient, Reason: classify.ReasonCloudSQLDial}) {
		t.Errorf("type rules alone: %v; if they now treat a server identity failure as fatal, the rule in cloudsql.Rules can go", got)
	}

	e2 := newEnv(t, envOpts{})
	_ = e2.d.Close()
	_, err = e2.d.Dial(gcptest.CtxFor(t, 30*time.Second), e2.fake.ConnName())
	if !errors.Is(err, cloudsqlconn.ErrDialerClosed) {
		t.Fatalf("Dial after Close = %v", err)
	}
	if got := c.Classify(err); got != (classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonDialerClosed}) {
		t.Errorf("closed dialer: %v, want fatal/dialer-closed", got)
	}
	// A refused dial is not mistaken for an identity failure.
	e3 := newEnv(t, envOpts{})
	e3.fake.Refuse(1)
	_, err = e3.d.Dial(gcptest.CtxFor(t, 30*time.Second), e3.fake.ConnName())
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial = %v, want ECONNREFUSED", err)
	}
	if got := c.Classify(err); got != (classify.Verdict{Class: classify.Transient, Reason: classify.ReasonConnRefused}) {
		t.Errorf("refused: %v, want transient/conn-refused", got)
	}
}

// TestConnectorWithoutWith: the pattern cloudsqlconn's README shows for
// pgx — the dialer's Dial set as ConnConfig.DialFunc — kept as it is with
// a holdfast factory that was not given cloudsql.With. The factory cannot
// classify the connector's errors (a token 503 is Fatal "unknown": the
// seed's incident, unprotected), and says so: one WARN per factory naming
// cloudsql.With. With cloudsql.With (TestIAMTokenFetch503Once) the same
// 503 is retried.
func TestConnectorWithoutWith(t *testing.T) {
	t.Parallel()
	s, err := fake.New(fake.Config{Backend: pgtest.Addr(t)})
	s = gcptest.Started(t, s, err)
	d := gcptest.Dialer(t, s, true, cloudsqlconn.NewDialer)
	var logs fakes.LogBuffer
	f := gcptest.NewFactory(t, &logs)
	cfg := gcptest.Parse(t, "host=localhost user=postgres dbname=postgres sslmode=disable")
	instance := s.ConnName()
	cfg.ConnConfig.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.Dial(ctx, instance) }
	pool := gcptest.Pool(t, f, cfg)
	s.Fail(fake.LoginToken, 503, 100)
	gcptest.WantUnclassified(t, f, pool, &logs, "cloud.google.com/go/cloudsqlconn", "cloudsql.With(dialer, instance)")
}
