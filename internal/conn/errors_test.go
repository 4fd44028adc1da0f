package conn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/admit"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestQueuedErrorIsTransient: a connect the admission limit did not admit
// is Transient "connect-queued", matches ErrQueued and its cause, and is
// one a lower layer already held (WaitedBelow: Acquire does not retry it).
func TestQueuedErrorIsTransient(t *testing.T) {
	c := classify.New(Rules()...)
	err := errors.Join(&pgconn.ConnectError{}, &queuedError{waited: time.Second, inFlight: 2, err: admit.ErrTimeout})
	if v := c.Classify(err); v.Class != classify.Transient || v.Reason != classify.ReasonQueued {
		t.Errorf("Classify = %v; want Transient %s", v, classify.ReasonQueued)
	}
	if !errors.Is(err, ErrQueued) || !errors.Is(err, admit.ErrTimeout) || !WaitedBelow(err) {
		t.Errorf("errors.Is or WaitedBelow fails on %v", err)
	}
	canceled := &queuedError{err: context.Canceled}
	if v := c.Classify(canceled); v.Reason != classify.ReasonQueued || !errors.Is(canceled, context.Canceled) {
		t.Errorf("a canceled wait: %v, %v", v, canceled)
	}
	if got, want := canceled.Error(), "holdfast: connect not admitted after waiting 0s (0 connects of the pool in flight): context canceled"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestPanicErrorIsFatal: a panicking password function is Fatal "panic".
func TestPanicErrorIsFatal(t *testing.T) {
	v := classify.New(Rules()...).Classify(&panicError{value: "boom"})
	if v.Class != classify.Fatal || v.Reason != classify.ReasonPanic {
		t.Errorf("Classify = %v; want Fatal %s", v, classify.ReasonPanic)
	}
}
