package holdfast

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/internal/pause"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RunTx runs fn in a transaction begun on db with opts, as
// pgx.BeginTxFunc does (BEGIN, fn, COMMIT; ROLLBACK when fn returns an
// error), and runs the whole of it again — a new transaction, on a
// connection the pool's routing chooses — only when the failure proves
// that nothing committed:
//
//   - 40001 serialization_failure or 40P01 deadlock_detected, at any
//     statement or at COMMIT (the server rolled the transaction back);
//   - the connection failed, or was cut by a failover, before COMMIT was
//     sent (the server rolls back a transaction whose connection breaks);
//     or nothing was sent at all (pgconn.SafeToRetry);
//   - 25006 read-only on a connection that holdfast's routing has since
//     left (a writer that failed over, a blue/green switchover);
//   - COMMIT's answer lost on a server in hot standby (a read-only
//     transaction on a reader: ReadWrite.Read(ctx)), where nothing commits;
//   - holdfast's own waits and refusals: *failover.HoldError,
//     *failover.NotWriterError, *bluegreen.SuspendError,
//     *bluegreen.DroppedError.
//
// db is anything that begins a pgx transaction: a *pgxpool.Pool (its
// connection is taken through [Factory.Acquire], with its retry), a
// [DBTX] (ReadWrite.Write() for the writer, ReadWrite.Read(ctx) for a
// read-only transaction on a reader: set opts.AccessMode to pgx.ReadOnly),
// a *pgx.Conn, a pgx.Tx (a savepoint); a *sql.DB through sqldb.RunTx.
//
// It never runs fn again when fn returned an error of its own (one that
// wraps none of those: Classify says Fatal "function-error"), nor after
// COMMIT was sent and its answer was lost: that returns an
// *OutcomeUnknownError (errors.Is(err, ErrOutcomeUnknown); Classify says
// Fatal "outcome-unknown"). fn must not keep tx beyond its return, and
// should do nothing but the transaction's work: it may run more than
// once. With sqlc, pass queries.WithTx(tx) to your code.
//
// The re-runs follow the factory's transaction policy (WithTxPolicy: 3
// runs, a short jittered backoff), ctx's deadline (no backoff is slept
// past it) and the retry budget, and are counted like the connect retries
// (holdfast.layer "transaction": holdfast.retries, a WARN line per re-run,
// the span events), their metrics and log lines naming the target of the
// pool behind db as every holdfast series of a pool does (pool.name,
// server.address, server.port, db.namespace). The runner is the request's retry: a BEGIN whose
// connect the connect layer gave up on (its *retry.Error, a transient
// cause) is run again, a little later, as a request-level loop would; the
// budget keeps a long outage from multiplying connects. RunTx returns nil
// once a run succeeds, else the last failure in a *retry.Error
// (errors.Is and errors.As reach it); the error carries no secret
// holdfast knows.
func (f *Factory) RunTx(ctx context.Context, db interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	switch {
	case f == nil:
		return &ConfigError{Field: "Factory", Why: "nil factory: use holdfast.New"}
	case db == nil:
		return &ConfigError{Field: "db", Why: "nil: a pool, a DBTX, a connection or a transaction"}
	case fn == nil:
		return &ConfigError{Field: "fn", Why: "nil func"}
	}
	var pool *pgxpool.Pool // for the hints of a connect's failure
	switch p := db.(type) {
	case *pgxpool.Pool:
		if p == nil {
			return &ConfigError{Field: "db", Why: "nil pool"}
		}
		pool, db = p, f.DBTX(p) // its connections through Acquire
	case *DBTX:
		pool = p.pool
	}
	if dl, ok := ctx.Deadline(); ok {
		ctx = retry.WithCallerDeadline(ctx, dl) // for the connects BEGIN waits on
	}
	start := time.Now() // the policy's MaxElapsed counts from here, not from the first failure
	var door *conn.Door // made at the first failure
	rerun := false
	run := func(ctx context.Context) error {
		if rerun {
			ctx = conn.ConnectsWithin(ctx) // a re-run's connect ends within the runner's bound
		}
		rerun = true
		err := runTx(ctx, db, opts, fn)
		if s := stepOf(err); s != nil && s.step == stepBegin && door != nil {
			door.Tried(err) // a connect's failure: its attempts are counted
		}
		return err
	}
	err := run(ctx)
	if err == nil {
		return nil
	}
	ctx = obs.WithTarget(ctx, txTarget(db)) // the re-runs' metrics and log lines name the pool
	door = f.e.NewDoor(pool)
	if s := stepOf(err); s != nil && s.step == stepBegin {
		door.Tried(err)
	}
	if m := txFailover(f, pool, db); m != nil {
		// A re-run waits for its backoff's step or the monitor's next
		// change (a writer held, a new writer known), whichever is first:
		// through a switchover, writes resume when the new writer does,
		// not at the backoff's next step.
		ctx = pause.WithWake(ctx, m.Changed)
	}
	r := f.tx
	r.Classify = f.txVerdict.Classify
	ctx, cancel := conn.Within(ctx, start, r.Policy)
	defer cancel()
	err = f.e.RetryFrom(ctx, &r, conn.LayerTransaction, err, run)
	re := (*retry.Error)(nil)
	if errors.As(err, &re) && re.Verdict.Reason == classify.ReasonFunctionError {
		re.Last = &functionError{err: re.Last} // Classify says so too
	}
	if s := stepOf(err); s != nil && s.step == stepBegin {
		// BEGIN's connect failed: one line, counting every run's
		// attempts, the runner's stop; not a retry summary in another.
		err = door.End(err)
	}
	return f.e.Redact(err)
}

// txFailover returns the failover monitor of the pool behind db (pool, a
// DBTX's, sqldb.RunTx's *sql.DB's), or nil. Called on the failure path
// only.
func txFailover(f *Factory, pool *pgxpool.Pool, db any) failover.Monitor {
	if pool == nil {
		if p, ok := db.(conn.Pooled); ok {
			pool = p.Pool()
		}
	}
	if pool == nil {
		return nil
	}
	return f.Failover(pool)
}

// txTarget returns the target of the pool behind db, which the runner's
// telemetry names as every holdfast series of a pool does: that of a
// DBTX (a pool given to RunTx, ReadWrite.Write(), ReadWrite.Read(ctx)),
// of sqldb.RunTx's *sql.DB (conn.Pooled), or of the pool that made a
// connection (a *pgx.Conn, a *pgxpool.Conn, a pgx.Tx's); nil when no
// holdfast engine configured it. Called on the failure path only.
func txTarget(db interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}) *obs.Target {
	switch d := db.(type) {
	case *DBTX:
		return conn.OfPool(d.pool).Target()
	case conn.Pooled:
		return conn.OfPool(d.Pool()).Target()
	case *pgx.Conn:
		return conn.ConnTarget(d)
	case *pgxpool.Conn:
		return conn.ConnTarget(d.Conn())
	case pgx.Tx:
		return conn.ConnTarget(d.Conn())
	}
	return nil
}

// runTx is one run of RunTx. Its failures before COMMIT are tagged with
// their step (txStepError); COMMIT's go through commitError.
func runTx(ctx context.Context, db interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return &txStepError{step: stepBegin, err: err}
	}
	if err := fn(tx); err != nil {
		// Whether the function's failure closed the connection (a failover
		// layer closes one that reached a standby), read before ROLLBACK,
		// which may hand the connection back to its pool (a DBTX's).
		closed := false
		if c := tx.Conn(); c != nil {
			closed = c.PgConn().IsClosed()
			if ie := conn.InactiveWrite(c, err); ie != nil {
				err = ie // a write through a global cluster's inactive endpoint: typed, not re-run
			}
		} else if p, ok := db.(conn.Pooled); ok {
			if cc, ok := tx.(interface{ ConnClosed() bool }); ok {
				closed = cc.ConnClosed() // the same through database/sql (sqldb.RunTx)
			}
			if ie := conn.PoolInactiveWrite(p.Pool(), err); ie != nil {
				err = ie // the same through database/sql (sqldb.RunTx)
			}
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackBound)
		_ = tx.Rollback(rctx)
		cancel()
		return &txStepError{step: stepWork, err: err, closed: closed}
	}
	c := tx.Conn()
	if c != nil {
		conn.MarkCommit(c) // what the connection sends next is the COMMIT
	}
	if err := tx.Commit(ctx); err != nil {
		return commitError(lostOnStandby(c, err))
	}
	return nil
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
// driver.ErrBadConn and sql.ErrTxDone, which say the same) or when its
// answer was lost on a server in hot standby (a conn.StandbyLostError:
// nothing committed there), an *OutcomeUnknownError otherwise: it was
// sent and its answer is lost (the connector marks a connection that
// failed; a context that ended while COMMIT ran leaves it unknown too).
func commitError(err error) error {
	var sl *conn.StandbyLostError
	if errors.As(err, &sl) {
		return err
	}
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

// functionError is a transaction function's own error, as the runner
// returns it once it gave up: Classify says Fatal "function-error" of it
// (functionRule), errors.Is and errors.As reach the function's error, and
// its text is that error's.
type functionError struct{ err error }

func (e *functionError) Error() string { return e.err.Error() }
func (e *functionError) Unwrap() error { return e.err }

// functionRule classifies a transaction function's own error, never
// re-run, as Fatal "function-error".
func functionRule(err error) (classify.Verdict, bool) {
	var fe *functionError
	if errors.As(err, &fe) {
		return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonFunctionError}, true
	}
	return classify.Verdict{}, false
}

// txRules are the transaction runner's verdict on a failed run, in
// order: Transient only when the failure proves that nothing committed
// (see Factory.RunTx); Fatal otherwise ("outcome-unknown" for a COMMIT
// whose answer was lost, "function-error" for the function's own error).
// They decide from types and SQLSTATE codes; the last always decides.
func txRules(f *Factory) []classify.Rule {
	fatal := func(reason string) (classify.Verdict, bool) {
		return classify.Verdict{Class: classify.Fatal, Reason: reason}, true
	}
	transient := func(reason string) (classify.Verdict, bool) {
		return classify.Verdict{Class: classify.Transient, Reason: reason}, true
	}
	code := func(err error) string {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return pe.Code
		}
		return ""
	}
	return []classify.Rule{
		// A COMMIT, or a statement that commits on its own, whose answer
		// was lost: unknown, but on a server in hot standby, where nothing
		// commits.
		func(err error) (classify.Verdict, bool) {
			var sl *conn.StandbyLostError
			switch {
			case errors.As(err, &sl):
				return transient(classify.ReasonStandbyLost)
			case errors.Is(err, ErrOutcomeUnknown):
				return fatal(classify.ReasonOutcomeUnknown)
			}
			return classify.Verdict{}, false
		},
		// A COMMIT that a lower layer already held or retried.
		func(err error) (classify.Verdict, bool) {
			if stepOf(err) == nil && conn.WaitedBelow(err) {
				return fatal(conn.ReasonRetriedBelow)
			}
			return classify.Verdict{}, false
		},
		// The server rolled the transaction back.
		func(err error) (classify.Verdict, bool) {
			switch code(err) {
			case "40001":
				return transient(classify.ReasonSerialization)
			case "40P01":
				return transient(classify.ReasonDeadlock)
			case "25006":
				if _, ok := errors.AsType[*failover.WriterRegionError](err); ok {
					return f.Classify(err), true // a global cluster's inactive endpoint: Fatal, with its reason
				}
				if s := stepOf(err); s != nil && s.closed {
					// holdfast's failover layer closed the connection: it
					// reached a standby or a read-only server by the
					// writer endpoint, and a new connection goes to the
					// writer.
					return transient(classify.ReasonReadOnlyMoved)
				}
				return fatal(classify.ReasonPrefixSQLState + "25006")
			}
			return classify.Verdict{}, false
		},
		// holdfast's own waits and refusals: as the factory classifies them.
		func(err error) (classify.Verdict, bool) {
			var he *failover.HoldError
			var ne *failover.NotWriterError
			var se *bluegreen.SuspendError
			var de *bluegreen.DroppedError
			if errors.As(err, &he) || errors.As(err, &ne) || errors.As(err, &se) || errors.As(err, &de) {
				return f.Classify(err), true
			}
			return classify.Verdict{}, false
		},
		// Nothing was sent (database/sql's ErrBadConn says the same: pgx's
		// stdlib returns it only then).
		func(err error) (classify.Verdict, bool) {
			if pgconn.SafeToRetry(err) || errors.Is(err, driver.ErrBadConn) {
				return transient(classify.ReasonNotCommitted)
			}
			return classify.Verdict{}, false
		},
		// COMMIT's failure, a lost answer made unknown by commitError: what
		// is left is the server's answer. A session the server ended
		// instead of committing (FATAL 57P01 as COMMIT's answer: a backend
		// terminated before its commit began; one terminated while it
		// waits for a synchronous standby after committing sends a WARNING
		// and no FATAL, and reads as a lost answer) committed nothing.
		func(err error) (classify.Verdict, bool) {
			if stepOf(err) != nil {
				return classify.Verdict{}, false
			}
			if code(err) != "" && classify.ConnectionLost(err) {
				return transient(classify.ReasonNotCommitted)
			}
			return fatal(f.Classify(err).Reason)
		},
		// BEGIN, or a statement of the open transaction, on a connection
		// that broke: the server rolls the transaction back (pgx reports
		// the loss as ErrConnClosed after a simple-protocol statement,
		// which the factory calls outcome-unknown: inside a transaction it
		// is not). BEGIN, or a connect that failed (database/sql connects
		// inside the run): nothing of this run reached a server. Anything
		// else is the function's own error.
		func(err error) (classify.Verdict, bool) {
			if brokenConn(err) {
				return transient(classify.ReasonNotCommitted)
			}
			var ce *pgconn.ConnectError
			if v := f.Classify(err); v.Retryable() && (stepOf(err).step == stepBegin || conn.WaitedBelow(err) || errors.As(err, &ce)) {
				return v, true
			}
			return fatal(classify.ReasonFunctionError)
		},
	}
}

// stepOf returns the step of a failed run, nil for COMMIT's failure.
func stepOf(err error) *txStepError {
	var s *txStepError
	errors.As(err, &s)
	return s
}

// brokenConn reports whether err shows that the connection broke rather
// than that a server answered: a failover's cut, pgx's ErrConnClosed
// after a statement was sent, or what classify.ConnectionLost recognises.
func brokenConn(err error) bool {
	var cut *failover.CutError
	return errors.As(err, &cut) || closedInFlight(err) || classify.ConnectionLost(err)
}
