package alloydb_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/alloydbconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/alloydb"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes"
	fake "github.com/holdfast-db/holdfast/fakes/alloydbtest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
	"github.com/holdfast-db/holdfast/retry"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The end-to-end tests below run the real alloydbconn dialer of go.mod
// against the fake AlloyDB of fakes/alloydbtest (its Admin API, token
// endpoint and server-side proxies, metadata exchange included), which
// forwards to a real PostgreSQL, through a pgxpool configured by a
// holdfast Factory built with alloydb.With's integration. Each logs how
// long its case took; RetryPolicy's table comes from these logs.

// env is one pool through the real dialer and the fake.
type env struct {
	fake  *fake.Server
	d     *alloydbconn.Dialer
	f     *holdfast.Factory
	pool  *pgxpool.Pool
	dials atomic.Int32 // calls of the dial function holdfast wraps
	logs  *fakes.LogBuffer
}

type envOpts struct {
	cfg      fake.Config
	iam      bool
	uri      string                   // default the primary's
	dialer   []alloydbconn.Option     // appended to the fake's options
	dialOpts []alloydbconn.DialOption // given to Integration
	holdfast []holdfast.Option        // appended to the integration
	dsn      string                   // default "host=localhost user=postgres dbname=postgres"
	noTypes  bool                     // the control: the integration without TypeRules
}

// startFake starts a fake AlloyDB forwarding to the package's PostgreSQL.
func startFake(t *testing.T, cfg fake.Config) *fake.Server {
	t.Helper()
	if cfg.Backend == "" {
		cfg.Backend = pgtest.Addr(t)
	}
	s, err := fake.New(cfg)
	return gcptest.Started(t, s, err)
}

// realDialer builds the real connector's dialer pointed at s.
func realDialer(t *testing.T, s *fake.Server, iam bool, extra ...alloydbconn.Option) *alloydbconn.Dialer {
	t.Helper()
	return gcptest.Dialer(t, s, iam, alloydbconn.NewDialer, extra...)
}

// newEnv starts a fake, a real dialer and a pool configured the documented
// way: holdfast.New(alloydb.With(d, uri)) (here its Integration, with the
// dial counted), then Factory.Configure. The DSN keeps pgx's default
// sslmode (prefer), which the integration must neutralise.
func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	s := startFake(t, o.cfg)
	e := &env{fake: s, d: realDialer(t, s, o.iam, o.dialer...), logs: &fakes.LogBuffer{}}
	uri := o.uri
	if uri == "" {
		uri = s.URI()
	}
	in := gcptest.Counted(alloydb.Integration(e.d, uri, o.dialOpts...), &e.dials)
	if o.noTypes {
		in.TypeRules = nil
	}
	e.f = gcptest.NewFactory(t, e.logs, append([]holdfast.Option{holdfast.WithIntegration(in)}, o.holdfast...)...)
	dsn := o.dsn
	if dsn == "" {
		dsn = "host=localhost user=postgres dbname=postgres"
	}
	e.pool = gcptest.Pool(t, e.f, gcptest.Parse(t, dsn))
	return e
}

func (e *env) failure(err error) gcptest.Failure { return gcptest.FailureOf(e.f, err) }

// TestSeedPlan is the seed's test plan (the Cloud SQL IAM token 503
// incident), played through AlloyDB's connector: a token fetch that
// answers 503 once costs one more attempt and the Ping succeeds with one
// connection; a 403 is tried once and fails at once, Fatal, with a hint.
func TestSeedPlan(t *testing.T) {
	t.Parallel()
	t.Run("IAM login token 503 once", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{iam: true})
		e.fake.Fail(fake.LoginToken, 503, 1)
		e.wantRetriedOnce(t, "token-fetch-503")
		if st := e.fake.Stats(); st.LoginTokens != 2 || st.Instances.IAMLogins != 1 {
			t.Errorf("fake stats = %+v; want 2 login token fetches (the 503, then one), 1 IAM login", st)
		}
	})
	t.Run("Admin API token 503 once", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		e.fake.Fail(fake.APIToken, 503, 1)
		e.wantRetriedOnce(t, "token-fetch-503")
	})
	t.Run("Admin API 403", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		e.fake.Fail(fake.GenerateClientCertificate, 403, -1)
		fl := e.wantFatalAtOnce(t, classify.ReasonAlloyDBPermissionDenied)
		if !strings.Contains(fl.Hint, "roles/alloydb.client") {
			t.Errorf("hint = %q, want it to name roles/alloydb.client", fl.Hint)
		}
	})
	t.Run("IAM login token 403", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{iam: true})
		e.fake.Fail(fake.LoginToken, 403, -1)
		fl := e.wantFatalAtOnce(t, classify.ReasonTokenDenied)
		if !strings.Contains(fl.Hint, "alloydb.With") {
			t.Errorf("hint = %q, want it to name the connector's credentials", fl.Hint)
		}
	})
}

// wantRetriedOnce: the Ping succeeds after exactly one holdfast retry of a
// failure of reason, with one connection made.
func (e *env) wantRetriedOnce(t *testing.T, reason string) {
	t.Helper()
	start := time.Now()
	if err := e.pool.Ping(gcptest.CtxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Ping = %v, want success after one retry", err)
	}
	gcptest.Measured(t, start)
	if got := e.pool.Stat().NewConnsCount(); got != 1 {
		t.Errorf("NewConnsCount = %d, want exactly 1", got)
	}
	if got := e.dials.Load(); got != 2 {
		t.Errorf("dials = %d, want 2 (the failure, then success)", got)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "error.reason="+reason) || !strings.Contains(logs, "holdfast.layer=connect") {
		t.Errorf("holdfast did not log the retried %s at the connect layer:\n%s", reason, logs)
	}
	if strings.Contains(logs, "fake-login-") || strings.Contains(logs, "fake-api-") {
		t.Errorf("a token appears in the logs:\n%s", logs)
	}
}

// wantFatalAtOnce: the Ping fails after one dial, not retried, Fatal with
// reason.
func (e *env) wantFatalAtOnce(t *testing.T, reason string) gcptest.Failure {
	t.Helper()
	start := time.Now()
	err := e.pool.Ping(gcptest.CtxFor(t, 30*time.Second))
	gcptest.Measured(t, start)
	if err == nil {
		t.Fatal("Ping succeeded")
	}
	fl := e.failure(err)
	if fl.Verdict != (classify.Verdict{Class: classify.Fatal, Reason: reason}) {
		t.Errorf("verdict = %v, want fatal/%s (err: %v)", fl.Verdict, reason, err)
	}
	if fl.Retry == nil || fl.Retry.Attempts != 1 || fl.Retry.Stop != retry.StopFatal {
		t.Errorf("retry error = %+v, want one attempt stopped as fatal", fl.Retry)
	}
	if got := e.dials.Load(); got != 1 {
		t.Errorf("dials = %d, want exactly 1", got)
	}
	if strings.Contains(e.logs.String(), "retrying") {
		t.Errorf("holdfast logged a retry of a fatal failure:\n%s", e.logs.String())
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("a fatal failure took %v", time.Since(start))
	}
	return fl
}

// TestSeedPlanControl is the control of TestSeedPlan: the same token 503,
// with the integration's TypeRules taken out, is Fatal "unknown" and tried
// once: the seed's incident, unprotected. The rules are what make the 503
// worth one more attempt.
func TestSeedPlanControl(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{iam: true, noTypes: true})
	e.fake.Fail(fake.LoginToken, 503, 1)
	err := e.pool.Ping(gcptest.CtxFor(t, 30*time.Second))
	if err == nil {
		t.Fatal("Ping succeeded without the type rules: the control does not control anything")
	}
	fl := e.failure(err)
	if fl.Verdict.Retryable() || fl.Verdict.Reason != classify.ReasonUnknown {
		t.Errorf("verdict = %v, want fatal/unknown", fl.Verdict)
	}
	if got := e.dials.Load(); got != 1 {
		t.Errorf("dials = %d, want 1", got)
	}
}

// TestAdminAPI503WithinConnectorRetry: the Admin API answers 503 once; the
// connector's Admin API client retries it itself, inside the one Dial, and
// holdfast adds nothing.
func TestAdminAPI503WithinConnectorRetry(t *testing.T) {
	t.Parallel()
	for _, ep := range []fake.Endpoint{fake.ConnectionInfo, fake.GenerateClientCertificate} {
		t.Run(ep.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOpts{})
			e.fake.Fail(ep, 503, 1)
			start := time.Now()
			if err := e.pool.Ping(gcptest.CtxFor(t, 30*time.Second)); err != nil {
				t.Fatalf("Ping = %v", err)
			}
			gcptest.Measured(t, start)
			if got := e.dials.Load(); got != 1 {
				t.Errorf("dials = %d, want 1: the connector absorbed the 503, holdfast must not retry", got)
			}
			if got := e.fake.Stats().Requests(ep); got != 2 {
				t.Errorf("%v calls = %d, want 2 (the 503, then success)", ep, got)
			}
		})
	}
}

// TestAdminAPI503OutlastsHoldfast: the Admin API answers 503 without end.
// The connector keeps retrying inside each Dial until DialTimeout cuts it;
// holdfast tries twice and gives up with a Transient verdict, in about
// 2×DialTimeout.
func TestAdminAPI503OutlastsHoldfast(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.Fail(fake.ConnectionInfo, 503, -1)
	start := time.Now()
	err := e.pool.Ping(gcptest.CtxFor(t, 60*time.Second))
	took := time.Since(start)
	gcptest.Measured(t, start)
	if err == nil {
		t.Fatal("Ping succeeded during an endless Admin API outage")
	}
	fl := e.failure(err)
	if fl.Verdict != (classify.Verdict{Class: classify.Transient, Reason: classify.ReasonTimeout}) {
		t.Errorf("verdict = %v, want transient/timeout (each Dial cut by DialTimeout)", fl.Verdict)
	}
	if fl.Retry == nil || fl.Retry.Attempts != 2 || fl.Retry.Stop != retry.StopExhausted {
		t.Errorf("retry error = %+v; want 2 attempts, exhausted", fl.Retry)
	}
	if got := e.dials.Load(); got != 2 {
		t.Errorf("dials = %d, want 2", got)
	}
	if p := alloydb.RetryPolicy(); took < 2*alloydb.DialTimeout || took > p.MaxElapsed {
		t.Errorf("took %v; want two full dials (2×%v) and less than MaxElapsed %v", took, alloydb.DialTimeout, p.MaxElapsed)
	}
	if st := e.fake.Stats(); st.ConnectionInfo < 6 {
		t.Errorf("connectionInfo calls = %d; the connector retries the 503 inside each Dial", st.ConnectionInfo)
	}
}

// TestFatalFailuresFailAtOnce: a missing instance, a refused metadata
// exchange, an untrusted server certificate, a bad token and a closed
// dialer make exactly one attempt and fail at once with a Fatal verdict.
func TestFatalFailuresFailAtOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		o      envOpts
		inject func(e *env)
		reason string
		hint   string
	}{
		{"connectionInfo 403", envOpts{}, func(e *env) { e.fake.Fail(fake.ConnectionInfo, 403, -1) }, classify.ReasonAlloyDBPermissionDenied, "roles/serviceusage.serviceUsageConsumer"},
		{"connectionInfo 404", envOpts{}, func(e *env) { e.fake.Fail(fake.ConnectionInfo, 404, -1) }, classify.ReasonAlloyDBInstanceNotFound, "instance URI"},
		{"instance that does not exist", envOpts{uri: "projects/" + fake.DefaultProject + "/locations/" + fake.DefaultRegion + "/clusters/" + fake.DefaultCluster + "/instances/nope"}, nil, classify.ReasonAlloyDBInstanceNotFound, "alloydb.With"},
		{"metadata exchange refused", envOpts{iam: true}, func(e *env) { e.fake.Primary().RejectMetadataExchange(-1, "") }, classify.ReasonAlloyDBMetadataExchange, "alloydbconn.WithIAMAuthN"},
		{"login token invalid_grant", envOpts{iam: true}, func(e *env) { e.fake.Fail(fake.LoginToken, 400, -1) }, classify.ReasonTokenInvalidGrant, ""},
		{"API token 401", envOpts{}, func(e *env) { e.fake.Fail(fake.APIToken, 401, -1) }, classify.ReasonTokenDenied, ""},
		{"untrusted server certificate", envOpts{cfg: fake.Config{UntrustedServerCert: true}}, nil, classify.ReasonTLS, ""},
		{"dialer closed", envOpts{}, func(e *env) { _ = e.d.Close() }, classify.ReasonDialerClosed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tt.o)
			if tt.inject != nil {
				tt.inject(e)
			}
			fl := e.wantFatalAtOnce(t, tt.reason)
			if !strings.Contains(fl.Hint, tt.hint) {
				t.Errorf("hint = %q, want it to say %q", fl.Hint, tt.hint)
			}
		})
	}
}

// TestInstanceNetworkFailuresAreRetried: the instance refuses the TCP
// connection, resets it in the TLS handshake, or resets it after the
// handshake (in the metadata exchange), once; the dial is retried and the
// Ping succeeds.
func TestInstanceNetworkFailuresAreRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		inject func(in *fake.Instance)
		reason string
	}{
		{"refused", func(in *fake.Instance) { in.Refuse(1) }, classify.ReasonConnRefused},
		{"reset mid-handshake", func(in *fake.Instance) { in.ResetHandshake(1) }, classify.ReasonConnReset},
		{"reset in the metadata exchange", func(in *fake.Instance) { in.ResetAfterHandshake(1) }, classify.ReasonConnReset},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOpts{})
			tt.inject(e.fake.Primary())
			e.wantRetriedOnce(t, tt.reason)
		})
	}
}
