package conn

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
)

// This file reads a connect that failed as one line: pgx's own error
// plus one holdfast clause, "(holdfast: 3 attempts in 310ms, gave up:
// attempts exhausted; <hint>)" or "(holdfast: not retried; <hint>)".
//
// On a pool's own paths (pool.Query, Exec, Acquire, ...) pgx's error is
// what the caller gets: pgxpool returns it unchanged. pgconn joins one
// line per Fallbacks entry it tried, "address (host): cause", and the
// connector's retry rounds are entries (doc.go); so the connector keeps
// pgx from trying entries that will never be dialed: it makes the first
// dial before pgconn starts (predial, state.go) and, when that dial fails
// for good, leaves the retry rounds out. A refused port, a missing socket,
// a dial that timed out or a DNS name that does not resolve then read as
// one line on every path; the line of the dial that gave up carries the
// clause. What stays several lines there is a connection whose handshake
// was tried several times (one line per attempt that reached a server,
// then the line that ends the retries) or failed for good on a failure
// pgconn does not stop at (a 28000, a TLS failure): the entries left each
// say they were not dialed.
//
// holdfast's own doors (Factory.NewPool and Start, Factory.Acquire,
// DBTX, the transaction runner, sqldb's connector) return the face's
// *ConnectError, whose text is always one line: pgx's prefix, the line of
// the attempt that decided, and one clause counting every attempt made
// for the caller, across the doors' own retries (door).

// Failure is a connect that failed, as the face's *ConnectError reports
// it.
type Failure struct {
	Layer string
	// Line is the decisive attempt's failure in pgx's words, without
	// holdfast's clause: for a door, pgx's whole line ("failed to connect
	// to `user=app database=orders`: 10.0.0.5:5432 (db): dial error:
	// ..."); for a dial's error inside pgx's, the cause (pgx writes the
	// rest). Empty for the entry that only ends a connection's retries
	// after a handshake failure: its cause is the line before it.
	Line string
	// Attempts is how many connection attempts were made, the failed
	// one included; 0 when not known.
	Attempts int
	// Elapsed is the time from the first attempt to the end; 0 when not
	// known.
	Elapsed time.Duration
	// Stop says why the retries ended; StopFatal (or 0) after one
	// attempt: not retried.
	Stop retry.StopReason
	// Verdict is the classification of the failure.
	Verdict classify.Verdict
	// Hint says what to check, in the user's words ("" when the error
	// says it all).
	Hint string
}

// Clause is holdfast's part of the text: "holdfast: 3 attempts in 310ms,
// gave up: attempts exhausted; <hint>", "holdfast: not retried; <hint>".
func (f *Failure) Clause() string {
	var b strings.Builder
	b.WriteString("holdfast: ")
	switch {
	case f.Attempts <= 1 && f.Attempts >= 0 && (f.Stop == 0 || f.Stop == retry.StopFatal || f.Stop == retry.StopExhausted):
		b.WriteString("not retried")
	case f.Attempts <= 1:
		b.WriteString("not retried: ")
		b.WriteString(f.Stop.String())
	default:
		b.WriteString(strconv.Itoa(f.Attempts))
		b.WriteString(" attempts")
		if f.Elapsed > 0 {
			b.WriteString(" in ")
			b.WriteString(roundDuration(f.Elapsed))
		}
		b.WriteString(", gave up: ")
		b.WriteString(f.Stop.String())
	}
	if f.Hint != "" {
		b.WriteString("; ")
		b.WriteString(f.Hint)
	}
	return b.String()
}

// Text is the one line: Line and the clause in parentheses, or the
// clause alone when Line is empty.
func (f *Failure) Text() string {
	if f.Line == "" {
		return f.Clause()
	}
	return f.Line + " (" + f.Clause() + ")"
}

// roundDuration writes d to the millisecond, or to 10 ms above a second.
func roundDuration(d time.Duration) string {
	if d >= time.Second {
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// failure makes the face's error of a connect of layer that failed with
// err: the *retry.Error of the loop that gave up (its attempts already
// count the connection's earlier ones), or the failure itself when
// nothing was retried. line is Failure.Line; start is when the
// connection's first attempt began (zero: not known).
func (cn *connector) failure(layer, line string, err error, start time.Time, target *obs.Target) error {
	f := &Failure{Layer: layer, Line: line, Attempts: 1, Stop: retry.StopFatal}
	var re *retry.Error
	if errors.As(err, &re) {
		f.Attempts, f.Stop, f.Verdict = re.Attempts, re.Stop, re.Verdict
	} else {
		f.Verdict = cn.classifier.Classify(err)
		if f.Verdict.Retryable() {
			f.Stop = retry.StopExhausted
		}
	}
	if !start.IsZero() {
		f.Elapsed = time.Since(start)
	}
	f.Hint = obs.Hint(f.Verdict.Reason, target)
	if f.Hint == "" && layer == LayerPassword {
		f.Hint = passwordHint
	}
	return cn.errs.Connect(f, err)
}

// passwordHint is the hint of a password function's failure that no
// reason's hint covers.
const passwordHint = "check the credentials and permissions of the identity the password function runs as, and the secret it reads"

// coreText is err's text without holdfast's clause: a failure's Line when
// err is the face's *ConnectError that has one, else its text.
func (cn *connector) coreText(err error) string {
	if f := cn.firstFailure(err); f != nil && f.Line != "" {
		return f.Line
	}
	return cn.tel.Redact(err.Error())
}

// lastOf is the last failure of a retry loop's error: its *retry.Error's
// Last, or err itself.
func lastOf(err error) error {
	var re *retry.Error
	if errors.As(err, &re) && re.Last != nil {
		return re.Last
	}
	return err
}

// door follows one of holdfast's doors (Acquire, Start, sqldb's
// connector, the transaction runner) while it retries: when it began, its
// failed tries and the connection attempts they made. Off the fast path:
// a door is made after its first failure.
type door struct {
	cn       *connector
	target   *obs.Target
	layer    string // the Layer of the end's error ("": the failure's own)
	start    time.Time
	tries    int // failed tries that were connects' failures
	attempts int // their connection attempts
}

// newDoor starts following a door after its first failure; layer is the
// Layer of its error (LayerStartup), "" for the failure's own.
func (cn *connector) newDoor(target *obs.Target, layer string) *door {
	return &door{cn: cn, target: target, layer: layer}
}

// Door is a door of the face that retries on its own (the transaction
// runner): Tried counts each failed try, End makes its error one line.
type Door struct{ d *door }

// NewDoor starts following a door of the face on pool (nil: none known,
// for the hints' target).
func (e *Engine) NewDoor(pool *pgxpool.Pool) *Door {
	var target *obs.Target
	if p := e.PoolOf(pool); p != nil {
		target = p.target
	}
	return &Door{d: e.cn.newDoor(target, "")}
}

// Tried counts a failed try whose error is a connect's failure (others
// are not counted).
func (d *Door) Tried(err error) { _ = d.d.failed(err) }

// End returns the door's error once its loop ended with err: the face's
// *ConnectError, one line, when the last failure is a connect's, counting
// every try's attempts; else err.
func (d *Door) End(err error) error { return d.d.end(err) }

// failed counts a failed try of the door and returns its error as one
// line (the face's *ConnectError), or err when it is no connect's
// failure (nil for nil): the error the door's retry loop classifies and
// logs.
func (d *door) failed(err error) error {
	if err == nil {
		return nil
	}
	f := d.cn.read(err, d.target)
	if f == nil {
		return err
	}
	if d.tries == 0 {
		d.start = time.Now().Add(-f.Elapsed) // the first try's own time
	}
	d.tries++
	d.attempts += max(f.Attempts, 1)
	return d.cn.errs.Connect(f, err)
}

// end returns the door's error once its loop ended with err (its
// *retry.Error, or the one failure it did not retry): one line whose
// attempts count every try's and whose stop is the loop's own when it
// ended for a reason of its own (attempts, time, budget, a failure not
// retried after a retry); err itself when it is no connect's failure,
// unless the door has a Layer of its own (startup: always its error).
func (d *door) end(err error) error {
	f := d.cn.read(err, d.target)
	if f == nil {
		if d.layer == "" {
			return err
		}
		f = &Failure{Line: d.cn.tel.Redact(err.Error()), Attempts: d.attempts, Stop: retry.StopFatal}
		f.Verdict = d.cn.classifier.Classify(err)
		f.Hint = obs.Hint(f.Verdict.Reason, d.target)
	}
	if d.layer != "" {
		f.Layer = d.layer
	}
	if d.tries > 1 {
		f.Attempts = d.attempts
		f.Elapsed = time.Since(d.start)
	}
	var loop *retry.Error
	if errors.As(err, &loop) && loop.Verdict.Reason != ReasonRetriedBelow && (loop.Stop != retry.StopFatal || d.tries > 1) {
		f.Stop = loop.Stop
	}
	return d.cn.errs.Connect(f, err)
}

// read returns the failure err says, nil when err is no connect's
// failure: the first in err's chain of holdfast's failures (a door's, a
// password function's) or pgx's *pgconn.ConnectError, read from its
// lines. The copy is the caller's.
func (cn *connector) read(err error, target *obs.Target) *Failure {
	held, pce := cn.outer(err, 0)
	if held != nil {
		c := *held
		return &c
	}
	if pce == nil {
		return nil
	}
	lead, items := pgxLines(pce)
	var decisive error
	if len(items) > 0 {
		decisive = items[0]
	}
	var end, stop *Failure
	counted := 0
	for _, it := range items {
		var nd *notDialedError
		if errors.As(it, &nd) {
			continue
		}
		f := cn.firstFailure(it)
		if f != nil && f.Line == "" {
			end = f
			continue
		}
		decisive, end, stop = it, nil, f
		counted++
	}
	f := &Failure{Layer: LayerConnect}
	switch {
	case end != nil:
		*f = *end
	case stop != nil:
		*f = *stop
	default:
		f.Attempts = counted
		f.Stop = retry.StopFatal
	}
	inner := f.Hint
	f.Verdict = cn.classifier.Classify(err)
	if end == nil && stop == nil && f.Verdict.Retryable() {
		f.Stop = retry.StopExhausted
	}
	f.Hint = obs.Hint(f.Verdict.Reason, target)
	if target == nil && inner != "" {
		f.Hint = inner // the connection's, which knew its target
	}
	line := ""
	if decisive != nil {
		line = cn.tel.Redact(decisive.Error())
		if stop != nil {
			line = strings.TrimSuffix(line, " ("+stop.Clause()+")")
		}
	}
	f.Line = fmt.Sprintf("failed to connect to `user=%s database=%s`: %s%s", pce.Config.User, pce.Config.Database, lead, line)
	return f
}

// outer returns the first, in errors.As's order, of holdfast's failures
// and pgx's *pgconn.ConnectError in err's tree.
func (cn *connector) outer(err error, depth int) (*Failure, *pgconn.ConnectError) {
	if err == nil || depth > 32 {
		return nil, nil
	}
	if f := cn.errs.FailureOf(err); f != nil {
		return f, nil
	}
	if pce, ok := err.(*pgconn.ConnectError); ok {
		return nil, pce
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return cn.outer(u.Unwrap(), depth+1)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if f, pce := cn.outer(e, depth+1); f != nil || pce != nil {
				return f, pce
			}
		}
	}
	return nil, nil
}

// firstFailure returns the first of holdfast's failures in err's tree,
// nil when there is none.
func (cn *connector) firstFailure(err error) *Failure {
	for depth := 0; err != nil && depth <= 32; depth++ {
		if f := cn.errs.FailureOf(err); f != nil {
			return f
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if f := cn.firstFailure(e); f != nil {
					return f
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

// pgxLines returns the lines of pgx's error: the per-dial failures its
// connect joined, and the text before them ("hostname resolving error: "
// when no host resolved); one item, the whole cause, when nothing was
// joined (an AfterConnect error, an invalid sslcertmode).
func pgxLines(pce *pgconn.ConnectError) (lead string, items []error) {
	inner := pce.Unwrap()
	for e := inner; e != nil; {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			lead = strings.TrimSuffix(inner.Error(), e.Error())
			return lead, j.Unwrap()
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return "", []error{inner}
}
