package conn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
)

// connector builds the connections of one factory's pools: one per
// Engine, shared by its pools, immutable after New but for the budget.
type connector struct {
	classifier *classify.Classifier
	password   func(ctx context.Context, host string) (string, error)
	creds      *credCache // a credentials function: password is creds.password
	errs       Errors     // the face's errors
	budget     *retry.Budget
	logger     *slog.Logger
	tel        *obs.Telemetry

	dial      retry.Retrier // one dial, layer "connect"
	fetch     retry.Retrier // one password fetch, layer "password"
	maxDials  int           // the policy's MaxAttempts: one allowance per connection
	perTry    time.Duration // the policy's AttemptTimeout, for first attempts
	authRetry bool          // Integration.RetryAuthFailure
	dialBy    string        // the integration (or option) that set the factory's dial
	hinted    atomic.Bool   // hintIntegration warned
}

// boundedDial is the fast-path dial of an attempt: a plain call of base,
// bounded by d (the attempt's bound; 0: none): pgxpool gives a connection
// being built no caller cancellation, so without a bound a hung dial would
// hold a pool slot until pgx's ConnectTimeout. A failure is left to the
// caller's retry; it warns when it comes from a dialer that an
// integration of holdfast should have brought (hintIntegration).
func (cn *connector) boundedDial(ctx context.Context, d time.Duration, base pgconn.DialFunc, network, addr string) (net.Conn, error) {
	dctx := ctx
	if d > 0 && !endsWithin(ctx, d) {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	conn, err := base(dctx, network, addr)
	if err != nil {
		cn.hintIntegration(ctx, err)
		return nil, err
	}
	// No budget refund here: a front end (a proxy, a load balancer) may
	// accept the dial of a database that is down. The refund comes when
	// the handshake completes (AfterConnect).
	cn.tel.FirstTry(ctx, LayerConnect) // no allocation unless a span records
	return conn, nil
}

// endsWithin reports whether ctx's deadline is at most d away, so that a
// bound of d would change nothing (and need not be allocated).
func endsWithin(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) <= d
}

// plainDial dials for a connection that the connector does not build
// (a blue/green monitor's): the fast path, then the dial policy's retries.
func (cn *connector) plainDial(ctx context.Context, base pgconn.DialFunc, network, addr string) (net.Conn, error) {
	start := time.Now()
	conn, err := cn.boundedDial(ctx, cn.perTry, base, network, addr)
	if err == nil {
		return conn, nil
	}
	r := cn.dial
	r.Policy.MaxAttempts = cn.maxDials
	err = cn.retryFrom(ctx, &r, LayerConnect, 0, err, func(ctx context.Context) error {
		c, err := base(ctx, network, addr)
		conn = c
		return err
	})
	if err != nil {
		return nil, cn.redact(cn.failure(LayerConnect, cn.coreText(lastOf(err)), err, start, obs.TargetOf(ctx)))
	}
	return conn, nil
}

// issuePassword sets cc's password to a fresh one from the password
// function, issued for the name the server answers to: the first of the
// routing's names (authHosts: compose.Conn.SetAuthHosts, or a blue/green
// monitor's), else cc's host. held, when not nil, is asked after a fetch
// that failed (fetchPassword).
func (cn *connector) issuePassword(ctx context.Context, cc *pgx.ConnConfig, authHosts []string, held heldFunc) error {
	host := cc.Host
	if len(authHosts) > 0 {
		host = authHosts[0]
	}
	cr, err := cn.fetchPassword(ctx, host, held)
	if err != nil {
		if f := cn.errs.FailureOf(err); f != nil {
			// It ends the connect: pgx's prefix, as pgx would write it.
			f.Line = fmt.Sprintf("failed to connect to `user=%s database=%s`: %s", cc.User, cc.Database, f.Line)
		}
		return err
	}
	cc.Password = cr.Password
	if cr.User != "" {
		cc.User = cr.User // WithCredentialsFunc
	}
	return nil
}

// heldFunc is asked after a password fetch failed with err, before any
// retry: stop ends the fetch with err (an error of the layers', or err
// itself); again starts it afresh, a first fetch (the layers waited for
// the token source to come back: no retry is spent on waiting); neither
// lets the fetch's own retries go on.
type heldFunc func(err error) (again bool, stop error)

// credentialsFailure reports whether err, a dial's, is an integration's
// dialer failing to get what a connection needs rather than the target
// failing: a token fetch or the vendor's Admin API (its certificate
// refresh) failing with a retryable error. The database may be up, and
// the connections already made keep serving. On the failure path only.
func (cn *connector) credentialsFailure(err error) bool {
	v := cn.classifier.Classify(err)
	if !v.Retryable() {
		return false
	}
	switch v.Reason {
	case classify.ReasonCloudSQLRefresh, classify.ReasonAlloyDBRefresh, classify.ReasonCloudSQLResourceExhausted:
		return true
	}
	return strings.HasPrefix(v.Reason, classify.ReasonPrefixTokenFetch) || strings.HasPrefix(v.Reason, classify.ReasonPrefixAdminAPI)
}

// fetchOnce is the heldFunc of a fetch made once: the outage prober's
// check, whose pace is its retry.
func fetchOnce(err error) (bool, error) { return false, err }

// fetchPassword fetches the password or token of a connection to host,
// under the retry policy, each call bounded by the policy's
// AttemptTimeout. After a first call that failed it asks held (when not
// nil) before retrying. The user is set only by a credentials function.
func (cn *connector) fetchPassword(ctx context.Context, host string, held heldFunc) (Credentials, error) {
	var start time.Time
	var pw Credentials
	var err error
	for {
		start = time.Now()
		if pw, err = cn.boundedPassword(ctx, host); err == nil {
			// No budget refund: a token fetched while the database is down
			// says nothing of the database. The refund comes when the
			// connection's handshake completes.
			cn.tel.FirstTry(ctx, LayerPassword)
			return pw, nil
		}
		if held == nil {
			break
		}
		again, stop := held(err)
		if stop != nil {
			return Credentials{}, stop
		}
		if !again {
			break
		}
	}
	ctx, cancel := Within(ctx, start, cn.fetch.Policy) // MaxElapsed from the first fetch, not from its failure
	defer cancel()
	err = cn.retryFrom(ctx, &cn.fetch, LayerPassword, 0, err, func(ctx context.Context) error {
		p, err := cn.callPassword(ctx, host)
		pw = p
		return err
	})
	if err != nil {
		return Credentials{}, cn.failure(LayerPassword, "the password function failed: "+cn.coreText(lastOf(err)), err, start, obs.TargetOf(ctx))
	}
	return pw, nil
}

// boundedPassword is the fast-path first fetch, bounded like boundedDial.
func (cn *connector) boundedPassword(ctx context.Context, host string) (Credentials, error) {
	if cn.perTry <= 0 {
		return cn.callPassword(ctx, host)
	}
	ctx, cancel := context.WithTimeout(ctx, cn.perTry)
	defer cancel()
	return cn.callPassword(ctx, host)
}

// callPassword calls the password function, recovering a panic into a
// Fatal error (Errors.Panic), or gets the credentials function's answer
// from the cache (credcache.go).
func (cn *connector) callPassword(ctx context.Context, host string) (cr Credentials, err error) {
	if cn.creds != nil {
		return cn.creds.get(ctx, host)
	}
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			cn.tel.Error(ctx, obs.MsgPasswordPanicked, LayerPassword, "panic",
				slog.String("panic", fmt.Sprintf("%T", r)), slog.String("stack", string(stack)))
			cr, err = Credentials{}, &panicError{value: r}
		}
	}()
	pw, err := cn.password(ctx, host)
	return Credentials{Password: pw}, err
}

// retryFrom is r.Continue with telemetry: the loop's attempts become span
// events, and its end a recovery, an exhaustion or a budget rejection, each
// counting prior, the connection's attempts before this loop's first: the
// log line and the returned *retry.Error say the same number. It runs
// only after a first failure, off the fast path.
func (cn *connector) retryFrom(ctx context.Context, r *retry.Retrier, layer string, prior int, firstErr error, op func(context.Context) error) error {
	ctx, loop := cn.tel.Begin(ctx, layer)
	loop.Prior(prior)
	rr := *r
	if budgetFree(ctx) {
		rr.Budget = nil // startup, the prober: bounded by their own policies
	}
	onRetry := rr.OnRetry
	rr.OnRetry = func(ctx context.Context, e retry.Event) {
		e.Attempt += prior
		loop.Observe(e)
		if onRetry != nil {
			onRetry(ctx, e)
		}
	}
	err := rr.Continue(ctx, firstErr, op)
	var re *retry.Error
	if errors.As(err, &re) {
		re.Attempts += prior // the connection's attempts, not this loop's
	}
	loop.End(ctx, err)
	return err
}

// redact wraps err so that its text carries no secret; nil stays nil, and
// an error whose text has none is returned as it is.
func (cn *connector) redact(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*redactedError); ok {
		return err
	}
	s := err.Error()
	r := cn.tel.Redact(s)
	if r == s {
		return err
	}
	return &redactedError{err: err, text: r}
}

// unclassifiedDialers are the packages of dialers whose errors only an
// integration classifies: a dial function of theirs set on the pool config
// by hand gets none of it. Recognised by the error types' package paths,
// without importing them.
var unclassifiedDialers = []struct{ pkg, integration, option string }{
	{"cloud.google.com/go/cloudsqlconn", "cloudsql", "cloudsql.With(dialer, instance)"},
	{"cloud.google.com/go/alloydbconn", "alloydb", "alloydb.With(dialer, instanceURI)"},
}

// hintIntegration warns once per factory when a dial failed with an error
// of a dialer that an integration of holdfast classifies, used without it
// (the Cloud SQL or AlloyDB connector's Dial set as ConnConfig.DialFunc, as
// their READMEs show): its token and Admin API failures are then
// Fatal "unknown", not retried. Called on a dial's failure path only.
func (cn *connector) hintIntegration(ctx context.Context, err error) {
	if cn.hinted.Load() {
		return
	}
	for _, d := range unclassifiedDialers {
		if cn.dialBy == d.integration || !fromPackage(err, d.pkg, 0) {
			continue
		}
		if cn.hinted.CompareAndSwap(false, true) {
			cn.logger.LogAttrs(ctx, slog.LevelWarn,
				"holdfast: a dial failed with an error of "+d.pkg+", which this factory does not classify: its transient failures (a token or Admin API 5xx) are not retried; give the dialer to the factory with "+d.option+" instead of setting ConnConfig.DialFunc",
				slog.String("error", cn.tel.Redact(err.Error())), slog.String("check", d.option))
		}
		return
	}
}

// fromPackage reports whether err's tree holds an error whose type is
// declared in pkg or below it.
func fromPackage(err error, pkg string, depth int) bool {
	if err == nil || depth > 16 {
		return false
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if p := t.PkgPath(); p == pkg || strings.HasPrefix(p, pkg+"/") {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return fromPackage(u.Unwrap(), pkg, depth+1)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if fromPackage(e, pkg, depth+1) {
				return true
			}
		}
	}
	return false
}
