package classify_test

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/holdfast-db/holdfast/classify"
)

// quotaError is an application error type the built-in rules do not know.
type quotaError struct{ retry bool }

func (e *quotaError) Error() string { return "quota " + secret }

// quotaRule makes *quotaError Transient or Fatal according to its field.
func quotaRule(err error) (classify.Verdict, bool) {
	var q *quotaError
	if !errors.As(err, &q) {
		return classify.Verdict{}, false
	}
	if q.retry {
		return transient("quota"), true
	}
	return fatal("quota-exhausted"), true
}

// errNonComparable is an error type that cannot be compared with ==.
type errNonComparable []string

func (e errNonComparable) Error() string { return "non-comparable" }

func TestRules(t *testing.T) {
	t.Parallel()

	errSentinel := errors.New("dialer is closed " + secret)
	never := func(error) (classify.Verdict, bool) { return classify.Verdict{}, false }
	all := func(error) (classify.Verdict, bool) { return fatal("all"), true }
	noReason := func(error) (classify.Verdict, bool) { return classify.Verdict{Class: classify.Transient}, true }
	sentinel := classify.Sentinel(errSentinel, fatal(classify.ReasonDialerClosed))

	tests := []struct {
		name  string
		rules []classify.Rule
		err   error
		want  classify.Verdict
	}{
		{"custom type made transient", []classify.Rule{quotaRule}, fmt.Errorf("x: %w", &quotaError{retry: true}), transient("quota")},
		{"custom type made fatal", []classify.Rule{quotaRule}, fmt.Errorf("x: %w", &quotaError{}), fatal("quota-exhausted")},
		{"custom type without rule is unknown", nil, &quotaError{retry: true}, fatal("unknown")},
		{"rule returning false falls through", []classify.Rule{never, quotaRule}, syscall.ECONNREFUSED, transient("conn-refused")},
		{"rules run before built-ins", []classify.Rule{all}, syscall.ECONNREFUSED, fatal("all")},
		{"first matching rule wins", []classify.Rule{quotaRule, all}, &quotaError{retry: true}, transient("quota")},
		{"nil rules are ignored", []classify.Rule{nil, quotaRule, nil}, &quotaError{retry: true}, transient("quota")},
		{"empty reason becomes rule", []classify.Rule{noReason}, errors.New("x"), transient("rule")},
		{"nil error never reaches rules", []classify.Rule{all}, nil, fatal("no-error")},
		{"sentinel found inside a join", []classify.Rule{sentinel},
			errors.Join(syscall.ECONNREFUSED, fmt.Errorf("dial: %w", errSentinel)), fatal("dialer-closed")},
		{"sentinel absent falls through", []classify.Rule{sentinel}, syscall.ECONNRESET, transient("conn-reset")},
		{"sentinel with nil target never matches", []classify.Rule{classify.Sentinel(nil, fatal("x"))},
			syscall.ECONNRESET, transient("conn-reset")},
		{"sentinel with non-comparable target never matches", []classify.Rule{classify.Sentinel(errNonComparable{"a"}, fatal("x"))},
			errNonComparable{"a"}, fatal("unknown")},
		{"sentinel on a huge shared tree stays bounded", []classify.Rule{sentinel},
			doubling(syscall.ECONNREFUSED, 60), fatal("too-complex")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := classify.New(tt.rules...).Classify(tt.err); got != tt.want {
				t.Fatalf("Classify() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNewCopiesRules(t *testing.T) {
	t.Parallel()
	rules := []classify.Rule{quotaRule}
	c := classify.New(rules...)
	rules[0] = func(error) (classify.Verdict, bool) { return fatal("replaced"), true }
	if got := c.Classify(&quotaError{retry: true}); got != transient("quota") {
		t.Fatalf("Classify() = %v after the caller's slice changed, want transient/quota", got)
	}
}

func TestClassifierConcurrent(t *testing.T) {
	t.Parallel()
	c := classify.New(quotaRule)
	errs := []error{&quotaError{retry: true}, syscall.ECONNREFUSED, pgErr("28P01")}
	want := []classify.Verdict{transient("quota"), transient("conn-refused"), fatal("sqlstate-28P01")}
	var wg sync.WaitGroup
	failures := make(chan string, 8*len(errs))
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				k := i % len(errs)
				if got := c.Classify(errs[k]); got != want[k] {
					failures <- fmt.Sprintf("Classify(%d) = %v, want %v", k, got, want[k])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
}
