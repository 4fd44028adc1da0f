package holdfast

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/retry"
)

// LayerTransaction is the retry layer of the transaction runners
// (Factory.BeginTxFunc, sqldb.BeginTxFunc): a re-run of a whole
// transaction.
const LayerTransaction = conn.LayerTransaction

// Reasons of the transaction runners' verdicts.
const (
	ReasonSerialization = "serialization-failure" // 40001: re-run the whole transaction
	ReasonDeadlock      = "deadlock"              // 40P01: re-run the whole transaction
	ReasonNotCommitted  = "not-committed"         // the connection failed before COMMIT was sent: the server rolled back
	ReasonReadOnlyMoved = "read-only-moved"       // 25006 from a server holdfast's routing has since left
	ReasonYourError     = "function-error"        // the function's own error: never re-run
)

// DefaultTxPolicy is the policy of the transaction runners unless
// WithTxPolicy says otherwise: 3 runs in all, 20 ms doubling to at most
// 200 ms between them with 50 % jitter (two transactions that conflicted
// should not meet again), 10 s overall; the caller's deadline bounds it
// too, and a run is not bounded (a transaction takes what it takes).
func DefaultTxPolicy() retry.Policy {
	return retry.Policy{
		MaxAttempts:     3,
		InitialInterval: 20 * time.Millisecond,
		Multiplier:      2,
		Jitter:          0.5,
		MaxInterval:     200 * time.Millisecond,
		MaxElapsed:      10 * time.Second,
	}
}

// WithTxPolicy sets the policy of the transaction runners
// (Factory.BeginTxFunc, sqldb.BeginTxFunc). Default: DefaultTxPolicy().
// Its AttemptTimeout, when set, bounds each run.
func WithTxPolicy(p retry.Policy) Option {
	return func(c *config) { c.txPolicy, c.txPolicySet = p, true }
}

// BeginTxFunc runs fn in a transaction on a connection of pool (taken by
// Factory.Acquire, with its retry), as pgx.BeginTxFunc does (BEGIN with opts, fn, COMMIT; ROLLBACK when fn
// returns an error), and runs the whole of it again — a new transaction,
// on a connection the pool's routing chooses — only when the failure
// proves that nothing committed:
//
//   - 40001 serialization_failure or 40P01 deadlock_detected, at any
//     statement or at COMMIT (the server rolled the transaction back);
//   - the connection failed, or was cut by a failover, before COMMIT was
//     sent (the server rolls back a transaction whose connection breaks);
//     or nothing was sent at all (pgconn.SafeToRetry);
//   - 25006 read-only on a connection that holdfast's routing has since
//     left (a writer that failed over, a blue/green switchover);
//   - holdfast's own waits and refusals: *failover.HoldError,
//     *failover.NotWriterError, *bluegreen.SuspendError,
//     *bluegreen.DroppedError.
//
// It never runs fn again when fn returned an error of its own (one that
// wraps none of those), nor after COMMIT was sent and its answer was lost:
// that returns an *OutcomeUnknownError (errors.Is(err, ErrOutcomeUnknown);
// Classify says Fatal "outcome-unknown"). fn must not keep tx beyond its
// return, and should do nothing but the transaction's work: it may run
// more than once. With sqlc, pass queries.WithTx(tx) to your code.
//
// The re-runs follow the factory's transaction policy (WithTxPolicy;
// DefaultTxPolicy: 3 runs, a short jittered backoff), ctx's deadline (no
// backoff is slept past it) and the retry budget, and are counted like the
// connect retries (holdfast.layer "transaction": holdfast.retries, a WARN
// line per re-run, the span events). The runner is the request's retry: a
// BEGIN (or, through database/sql, any statement before COMMIT) whose
// connect the connect layer gave up on (its *retry.Error, a transient
// cause) is run again, a little later, as a request-level loop would; the
// budget keeps a long outage from multiplying connects. The error
// returned carries no secret holdfast knows; errors.As reaches the last
// failure.
func (f *Factory) BeginTxFunc(ctx context.Context, pool *pgxpool.Pool, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	switch {
	case pool == nil:
		return &ConfigError{Field: "pool", Why: "nil pool"}
	case fn == nil:
		return &ConfigError{Field: "fn", Why: "nil func"}
	}
	if dl, ok := ctx.Deadline(); ok {
		ctx = retry.WithCallerDeadline(ctx, dl) // for the connects BEGIN waits on
	}
	return f.RunTx(ctx, func(ctx context.Context) (bool, error) { return f.runTx(ctx, pool, opts, fn) })
}

// runTx is one run of BeginTxFunc; it reports whether COMMIT was sent.
// Its failures before COMMIT are tagged with their step (txStepError).
func (f *Factory) runTx(ctx context.Context, pool *pgxpool.Pool, opts pgx.TxOptions, fn func(pgx.Tx) error) (bool, error) {
	c, err := f.Acquire(ctx, pool)
	if err != nil {
		return false, &txStepError{step: stepBegin, err: err}
	}
	defer c.Release()
	tx, err := c.BeginTx(ctx, opts)
	if err != nil {
		return false, &txStepError{step: stepBegin, err: err}
	}
	if err := fn(tx); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackBound)
		_ = tx.Rollback(rctx)
		cancel()
		return false, &txStepError{step: stepWork, err: err, closed: tx.Conn().PgConn().IsClosed()}
	}
	defer conn.MarkCommit(tx.Conn())() // what the connection sends next is the COMMIT
	return true, tx.Commit(ctx)
}

// rollbackBound bounds the ROLLBACK after a function's error, whatever
// the caller's context says (the connection is destroyed if it takes
// longer).
const rollbackBound = time.Second

// The steps of a transaction run.
const (
	stepBegin = iota + 1 // BEGIN: nothing durable yet
	stepWork             // the function, the transaction open: the server rolls it back if the connection breaks
)

// txStepError tags the failure of a run with its step; it reads as the
// failure itself.
type txStepError struct {
	step   int
	err    error
	closed bool // the connection was closed when the step failed
}

func (e *txStepError) Error() string { return e.err.Error() }
func (e *txStepError) Unwrap() error { return e.err }

// commitError is the error of a COMMIT that failed: err when the server
// refused it or nothing was sent (a *pgconn.PgError but a PANIC, a
// SafeToRetry failure, pgx's own refusals, database/sql's
// driver.ErrBadConn and sql.ErrTxDone, which say the same), an
// *OutcomeUnknownError otherwise: it was sent and its answer is lost (the
// connector marks a connection that failed; a context that ended while
// COMMIT ran leaves it unknown too).
func commitError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.SeverityUnlocalized == "PANIC" || pe.Severity == "PANIC") {
		// The server crashed while COMMIT ran: its commit record may be
		// on disk (recovery replays it).
		return &OutcomeUnknownError{Statement: "COMMIT", Err: err}
	}
	if errors.Is(err, ErrOutcomeUnknown) || errors.As(err, &pe) || pgconn.SafeToRetry(err) ||
		errors.Is(err, pgx.ErrTxCommitRollback) || errors.Is(err, pgx.ErrTxClosed) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return &OutcomeUnknownError{Statement: "COMMIT", Err: err}
}

// RunTx runs a transaction as the runners do (Factory.BeginTxFunc,
// sqldb.BeginTxFunc), for code that begins and commits its own way: run
// is one whole run — BEGIN, the work, COMMIT — that reports whether COMMIT
// was sent when it fails (commitSent: its error is COMMIT's). RunTx runs
// it again only when the failure proves that nothing committed: a failure
// before COMMIT was sent on a connection that broke, or one of the
// failures Factory.BeginTxFunc lists. A COMMIT that failed without a
// server's answer is an *OutcomeUnknownError, never run again. RunTx
// returns nil once a run succeeds, else the last failure in a
// *retry.Error (errors.Is and errors.As reach it; a function's own error,
// never re-run, comes back the same way: "gave up after 1 attempt (not
// retryable; fatal function-error)"). The error carries no secret
// holdfast knows.
func (f *Factory) RunTx(ctx context.Context, run func(ctx context.Context) (commitSent bool, err error)) error {
	if run == nil {
		return &ConfigError{Field: "run", Why: "nil func"}
	}
	once := func(ctx context.Context) error {
		sent, err := run(ctx)
		switch {
		case err == nil:
			return nil
		case sent:
			return commitError(err)
		}
		var step *txStepError
		if errors.As(err, &step) {
			return err
		}
		return &txStepError{step: stepWork, err: err}
	}
	err := once(ctx)
	if err == nil {
		return nil
	}
	return f.e.Redact(f.retryTx(ctx, err, once))
}

// retryTx re-runs a transaction after its first run failed with firstErr.
func (f *Factory) retryTx(ctx context.Context, firstErr error, run func(context.Context) error) error {
	r := f.tx
	r.Classify = f.txVerdict
	return f.e.RetryFrom(ctx, &r, LayerTransaction, firstErr, run)
}

// txVerdict classifies the failure of a transaction run for a re-run of
// the whole transaction: Transient only when it proves that nothing
// committed (see Factory.BeginTxFunc); Fatal otherwise ("outcome-unknown"
// for a COMMIT whose answer was lost, ReasonYourError for the function's
// own error).
func (f *Factory) txVerdict(err error) classify.Verdict {
	var step *txStepError
	errors.As(err, &step)
	var pe *pgconn.PgError
	var he *failover.HoldError
	var ne *failover.NotWriterError
	var se *bluegreen.SuspendError
	var de *bluegreen.DroppedError
	switch {
	case errors.Is(err, ErrOutcomeUnknown):
		return classify.Verdict{Class: classify.Fatal, Reason: ReasonOutcomeUnknown}
	case waitedBelow(err) && step == nil:
		return classify.Verdict{Class: classify.Fatal, Reason: conn.ReasonRetriedBelow}
	case errors.As(err, &pe) && pe.Code == "40001":
		return classify.Verdict{Class: classify.Transient, Reason: ReasonSerialization}
	case errors.As(err, &pe) && pe.Code == "40P01":
		return classify.Verdict{Class: classify.Transient, Reason: ReasonDeadlock}
	case errors.As(err, &pe) && pe.Code == "25006":
		if step != nil && step.closed {
			// holdfast's failover layer closed the connection: it
			// reached a standby or a read-only server by the writer
			// endpoint, and a new connection goes to the writer.
			return classify.Verdict{Class: classify.Transient, Reason: ReasonReadOnlyMoved}
		}
		return classify.Verdict{Class: classify.Fatal, Reason: "sqlstate-25006"}
	case errors.As(err, &he), errors.As(err, &ne), errors.As(err, &se), errors.As(err, &de):
		return f.Classify(err)
	case pgconn.SafeToRetry(err), errors.Is(err, driver.ErrBadConn):
		// Nothing was sent (database/sql's ErrBadConn says the same: pgx's
		// stdlib returns it only then).
		return classify.Verdict{Class: classify.Transient, Reason: ReasonNotCommitted}
	case step == nil:
		// COMMIT's failure, a lost answer made unknown by commitError: what
		// is left is the server's answer. A session the server ended
		// instead of committing (FATAL 57P01 as COMMIT's answer: a
		// backend terminated before its commit began; one terminated
		// while it waits for a synchronous standby after committing
		// sends a WARNING and no FATAL, and reads as a lost answer)
		// committed nothing.
		v := f.Classify(err)
		if errors.As(err, &pe) && connectionFailure(v.Reason) {
			return classify.Verdict{Class: classify.Transient, Reason: ReasonNotCommitted}
		}
		return classify.Verdict{Class: classify.Fatal, Reason: v.Reason}
	}
	// BEGIN, or a statement of the open transaction, on a connection that
	// broke: the server rolls the transaction back (pgx reports the loss
	// as ErrConnClosed after a simple-protocol statement, which the
	// classifier calls outcome-unknown: inside a transaction it is not).
	v := f.Classify(err)
	if connectionFailure(v.Reason) {
		return classify.Verdict{Class: classify.Transient, Reason: ReasonNotCommitted}
	}
	var ce *pgconn.ConnectError
	if v.Retryable() && (step.step == stepBegin || waitedBelow(err) || errors.As(err, &ce)) {
		// BEGIN, or a connect that failed (database/sql connects inside
		// the run): nothing of this run reached a server.
		return v
	}
	return classify.Verdict{Class: classify.Fatal, Reason: ReasonYourError}
}

// connectionFailure reports whether a Transient reason is a broken
// connection (not a server's answer that a new attempt might change).
func connectionFailure(reason string) bool {
	switch reason {
	case classify.ReasonConnReset, classify.ReasonConnClosed, ReasonOutcomeUnknown, classify.ReasonEOF,
		classify.ReasonTimeout, classify.ReasonConnRefused, classify.ReasonBrokenPipe,
		"failover-cut", // failover.Rule's reason for a *failover.CutError
		"sqlstate-57P01", "sqlstate-57P02", "sqlstate-57P03":
		return true
	}
	return false
}
