// Package typerule builds the classify.Rule of a package's own error
// types (bluegreen.Rule, failover.Rule): a verdict per type, the first
// type found in the error's chain deciding.
package typerule

import (
	"context"
	"errors"

	"github.com/holdfast-db/holdfast/classify"
)

// Case is the verdict for the errors whose chain holds one type.
type Case struct {
	match   func(error) bool
	verdict classify.Verdict
	// wait: the type is a wait that ended, which gets no verdict when the
	// caller canceled it.
	wait bool
}

// Of is the verdict of class and reason for an error whose chain holds a
// T (errors.As).
func Of[T error](class classify.Class, reason string) Case {
	return Case{match: has[T], verdict: classify.Verdict{Class: class, Reason: reason}}
}

// When is the verdict of class and reason for an error whose chain holds
// a T for which pred is true (the first T found, errors.As).
func When[T error](pred func(T) bool, class classify.Class, reason string) Case {
	return Case{match: func(err error) bool {
		t, ok := errors.AsType[T](err)
		return ok && pred(t)
	}, verdict: classify.Verdict{Class: class, Reason: reason}}
}

// Wait is Transient with reason for an error whose chain holds a T, a wait
// that ended (a held or suspended connection), unless the caller canceled
// it (context.Canceled in the chain): that is left to the other rules
// (classify: Fatal "canceled").
func Wait[T error](reason string) Case {
	c := Of[T](classify.Transient, reason)
	c.wait = true
	return c
}

// Rule returns the rule that gives the verdict of the first of cases
// whose type err's chain holds, and none when it holds none of them.
func Rule(cases ...Case) classify.Rule {
	return func(err error) (classify.Verdict, bool) {
		for _, c := range cases {
			if !c.match(err) {
				continue
			}
			if c.wait && errors.Is(err, context.Canceled) {
				return classify.Verdict{}, false
			}
			return c.verdict, true
		}
		return classify.Verdict{}, false
	}
}

func has[T error](err error) bool {
	_, ok := errors.AsType[T](err)
	return ok
}
