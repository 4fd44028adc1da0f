package lb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/holdfast-db/holdfast/lb"
)

// kindOf returns the Kind of the *lb.APIError in err, or 0.
func kindOf(err error) lb.Kind {
	if ae, ok := errors.AsType[*lb.APIError](err); ok {
		return ae.Kind
	}
	return 0
}

var allKinds = []lb.Kind{
	lb.KindSession, lb.KindAuth, lb.KindBusy, lb.KindUnavailable, lb.KindNotFound,
	lb.KindNoPrivilege, lb.KindStatsDisabled, lb.KindBadResponse, lb.KindRejected,
}

func TestAPIErrorRetryable(t *testing.T) {
	t.Parallel()
	for _, k := range allKinds {
		want := k == lb.KindBusy || k == lb.KindUnavailable
		if got := (&lb.APIError{Kind: k}).Retryable(); got != want {
			t.Errorf("%v: Retryable = %v, want %v", k, got, want)
		}
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"canceled call", &lb.APIError{Kind: lb.KindUnavailable, Err: fmt.Errorf("post: %w", context.Canceled)}, false},
		{"timed-out call", &lb.APIError{Kind: lb.KindUnavailable, Err: fmt.Errorf("post: %w", context.DeadlineExceeded)}, true},
		{"wrapped", fmt.Errorf("drain: %w", &lb.APIError{Kind: lb.KindBusy}), true},
		{"no Kind", &lb.APIError{}, false},
	}
	for _, tt := range tests {
		ae, ok := errors.AsType[*lb.APIError](tt.err)
		if !ok || ae.Retryable() != tt.want {
			t.Errorf("%s: Retryable = %v, want %v", tt.name, ok && ae.Retryable(), tt.want)
		}
	}
}

func TestKindString(t *testing.T) {
	t.Parallel()
	for k, want := range map[lb.Kind]string{0: "Kind(0)", lb.KindSession: "session expired", lb.KindRejected: "rejected", lb.KindRejected + 1: "Kind(10)", -1: "Kind(-1)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}
