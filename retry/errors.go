package retry

import (
	"errors"
	"fmt"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/enum"
)

// Sentinels matched by *Error through errors.Is.
var (
	// ErrExhausted: every allowed attempt failed transiently, or the time
	// left was too short for another one. The failure may clear later.
	ErrExhausted = errors.New("retry: attempts exhausted")
	// ErrBudgetExhausted: the shared retry budget refused a retry, which
	// happens during a sustained outage. The failure may clear later.
	ErrBudgetExhausted = errors.New("retry: retry budget exhausted")
	// ErrNotRetryable: the failure was classified Fatal and was not retried.
	ErrNotRetryable = errors.New("retry: not retryable")
)

// StopReason says why a retry loop gave up.
type StopReason int

const (
	// StopFatal: the last failure was classified Fatal.
	StopFatal StopReason = iota + 1
	// StopExhausted: MaxAttempts attempts all failed transiently.
	StopExhausted
	// StopDeadline: the next sleep would have overrun the deadline
	// (the caller's, or MaxElapsed), so the loop stopped early.
	StopDeadline
	// StopBudget: the shared retry budget refused the retry.
	StopBudget
	// StopContext: the caller's context ended (or MaxElapsed passed) during
	// an attempt or a sleep.
	StopContext
)

var stopNames = [...]string{
	StopFatal:     "not retryable",
	StopExhausted: "attempts exhausted",
	StopDeadline:  "deadline too close for another attempt",
	StopBudget:    "retry budget exhausted",
	StopContext:   "context done",
}

// String returns a short description such as "attempts exhausted".
func (s StopReason) String() string { return enum.Name("StopReason", s, stopNames[:]) }

// Error is returned by [Retrier.Do] when the operation did not succeed.
// It wraps the last failure (errors.Is and errors.As reach it) and, when the
// context ended, context.Cause of it. Whether the caller may try again later
// is given by Retryable: a Fatal failure or a canceled context is not
// retryable; exhausted attempts or budget are.
type Error struct {
	// Attempts is how many times the operation ran.
	Attempts int
	// Last is the error of the last attempt.
	Last error
	// Verdict is the classification of Last.
	Verdict classify.Verdict
	// Stop says why the loop gave up.
	Stop StopReason
	// Cause is context.Cause of the loop's context when Stop is StopContext.
	Cause error
}

// Error names the package, the attempts, why the loop stopped, the verdict
// and the last failure: "retry: gave up after 3 attempts (attempts
// exhausted; transient conn-refused): ...", or, for a failure that was
// not retried, "retry: not retried (fatal sqlstate-28P01): ..." and
// "retry: not retried (retry budget exhausted; transient conn-refused):
// ...". It adds no secret of its own; Last's text is pgx's or the
// connector's, which do not print passwords.
func (e *Error) Error() string {
	if e.Attempts <= 1 {
		if e.Stop == StopFatal {
			return fmt.Sprintf("retry: not retried (%s %s): %v", e.Verdict.Class, e.Verdict.Reason, e.Last)
		}
		return fmt.Sprintf("retry: not retried (%s; %s %s): %v", e.Stop, e.Verdict.Class, e.Verdict.Reason, e.Last)
	}
	return fmt.Sprintf("retry: gave up after %d attempts (%s; %s %s): %v",
		e.Attempts, e.Stop, e.Verdict.Class, e.Verdict.Reason, e.Last)
}

// Unwrap returns the last failure and, if set and not already in its chain,
// the context's cause.
func (e *Error) Unwrap() []error {
	if e.Cause != nil && !errors.Is(e.Last, e.Cause) {
		return []error{e.Last, e.Cause}
	}
	return []error{e.Last}
}

// Is matches ErrExhausted (StopExhausted, StopDeadline), ErrBudgetExhausted
// (StopBudget) and ErrNotRetryable (StopFatal).
func (e *Error) Is(target error) bool {
	switch target {
	case ErrExhausted:
		return e.Stop == StopExhausted || e.Stop == StopDeadline
	case ErrBudgetExhausted:
		return e.Stop == StopBudget
	case ErrNotRetryable:
		return e.Stop == StopFatal
	}
	return false
}

// Retryable reports whether trying the whole operation again later could
// succeed: true when the loop ran out of attempts, time or budget on a
// transient failure; false for a Fatal failure or a canceled context.
func (e *Error) Retryable() bool {
	switch e.Stop {
	case StopExhausted, StopDeadline, StopBudget:
		return true
	}
	return false
}

// InvalidPolicyError reports a Policy or BudgetConfig field with a nonsense
// value. It is not retryable: fix the configuration.
type InvalidPolicyError struct {
	Field string
	Value string
	Why   string
}

// ErrInvalidPolicy is matched by every *InvalidPolicyError.
var ErrInvalidPolicy = errors.New("retry: invalid policy")

func (e *InvalidPolicyError) Error() string {
	return fmt.Sprintf("retry: invalid %s %s: %s", e.Field, e.Value, e.Why)
}

// Is matches ErrInvalidPolicy.
func (e *InvalidPolicyError) Is(target error) bool { return target == ErrInvalidPolicy }
