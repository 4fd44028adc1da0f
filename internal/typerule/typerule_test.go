package typerule

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/holdfast-db/holdfast/classify"
)

type waitError struct{ err error }

func (e *waitError) Error() string { return "wait: " + e.err.Error() }
func (e *waitError) Unwrap() error { return e.err }

type cutError struct{ late bool }

func (*cutError) Error() string { return "cut" }

func TestRule(t *testing.T) {
	rule := Rule(
		Wait[*waitError]("held"),
		When(func(e *cutError) bool { return e.late }, classify.Transient, "late cut"),
		Of[*cutError](classify.Fatal, "cut"),
	)
	for _, tc := range []struct {
		name string
		err  error
		want classify.Verdict
		ok   bool
	}{
		{"wait", fmt.Errorf("x: %w", &waitError{context.DeadlineExceeded}), classify.Verdict{Class: classify.Transient, Reason: "held"}, true},
		{"wait canceled", &waitError{context.Canceled}, classify.Verdict{}, false},
		// the first case found decides, even with no verdict
		{"wait canceled before cut", errors.Join(&waitError{context.Canceled}, &cutError{}), classify.Verdict{}, false},
		{"cut", fmt.Errorf("x: %w", &cutError{}), classify.Verdict{Class: classify.Fatal, Reason: "cut"}, true},
		{"cut canceled", errors.Join(&cutError{}, context.Canceled), classify.Verdict{Class: classify.Fatal, Reason: "cut"}, true},
		{"late cut", fmt.Errorf("x: %w", &cutError{late: true}), classify.Verdict{Class: classify.Transient, Reason: "late cut"}, true},
		{"other", errors.New("other"), classify.Verdict{}, false},
		{"nil", nil, classify.Verdict{}, false},
	} {
		v, ok := rule(tc.err)
		if v != tc.want || ok != tc.ok {
			t.Errorf("%s: got %v, %v; want %v, %v", tc.name, v, ok, tc.want, tc.ok)
		}
	}
}
