package classify_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"testing"

	"github.com/holdfast-db/holdfast/classify"
)

// The vendor* types stand in for a vendor library's errors, which classify
// does not know: vendorTypes classifies them the way package cloudsql's
// TypeRules classify Google's and the Cloud SQL connector's (a config
// error, a status cause, a status wrapper), so that these tests check
// classify's ranking of TypeRule verdicts without importing any vendor.
// Package cloudsql's tests check its rules on the real types.

// vendorConfigError is a configuration mistake (like errtype.ConfigError).
type vendorConfigError struct{}

func (*vendorConfigError) Error() string { return "vendor config " + secret }

// vendorStatusError is a failed call with a status code, a cause of its own
// (like metadata.Error).
type vendorStatusError struct {
	code int
	err  error
}

func (e *vendorStatusError) Error() string {
	return "vendor status " + strconv.Itoa(e.code) + " " + secret
}
func (e *vendorStatusError) Unwrap() error { return e.err }

// vendorWrapError wraps a cause (like errtype.RefreshError, or
// googleapi.Error with its status): its own verdict counts only when nothing
// inside it is recognised.
type vendorWrapError struct {
	code int // 0: no verdict of its own
	err  error
}

func (e *vendorWrapError) Error() string { return "vendor wrap " + secret }
func (e *vendorWrapError) Unwrap() error { return e.err }

// vendorAs exposes a *vendorStatusError through an As method only.
type vendorAs struct{ code int }

func (vendorAs) Error() string { return "vendor as " + secret }
func (e vendorAs) As(target any) bool {
	if p, ok := target.(**vendorStatusError); ok {
		*p = &vendorStatusError{code: e.code}
		return true
	}
	return false
}

// vendorStatus: 429 and 5xx are transient, every other code fatal.
func vendorStatus(code int) classify.Verdict {
	r := "vendor-" + strconv.Itoa(code)
	if code == 429 || code >= 500 {
		return transient(r)
	}
	return fatal(r)
}

var vendorTypes = []classify.TypeRule{
	{Kind: classify.Misconfiguration, Match: func(err error) (classify.Verdict, bool) {
		if _, ok := classify.NodeAs[*vendorConfigError](err); ok {
			return fatal("vendor-config"), true
		}
		return classify.Verdict{}, false
	}},
	{Kind: classify.Cause, Match: func(err error) (classify.Verdict, bool) {
		if e, ok := classify.NodeAs[*vendorStatusError](err); ok {
			return vendorStatus(e.code), true
		}
		return classify.Verdict{}, false
	}},
	{Kind: classify.Wrapper, Match: func(err error) (classify.Verdict, bool) {
		if e, ok := classify.NodeAs[*vendorWrapError](err); ok && e.code != 0 {
			return vendorStatus(e.code), true
		}
		return classify.Verdict{}, false
	}},
}

// withVendor classifies with vendorTypes.
var withVendor = classify.New().WithTypes(vendorTypes...)

func TestTypeRules(t *testing.T) {
	t.Parallel()
	refused := syscallErr("dial", syscall.ECONNREFUSED)
	unknownCA := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	var nilStatus *vendorStatusError
	tests := []struct {
		name string
		err  error
		want classify.Verdict
	}{
		{"cause", &vendorStatusError{code: 503}, transient("vendor-503")},
		{"cause, wrapped", fmt.Errorf("call: %w", &vendorStatusError{code: 403}), fatal("vendor-403")},
		{"cause through an As method", fmt.Errorf("x: %w", vendorAs{429}), transient("vendor-429")},
		{"typed nil cause", nilStatus, fatal("unknown")},
		{"config", fmt.Errorf("x: %w", &vendorConfigError{}), fatal("vendor-config")},
		{"config beats refused", errors.Join(refused, &vendorConfigError{}), fatal("vendor-config")},
		{"config beats a fatal cause", errors.Join(pgErr("28P01"), &vendorConfigError{}), fatal("vendor-config")},
		{"canceled beats config", errors.Join(&vendorConfigError{}, context.Canceled), fatal("canceled")},
		{"tls beats config", errors.Join(&vendorConfigError{}, unknownCA), fatal("tls-verification")},
		{"a cause decides over a transient inside it", &vendorStatusError{code: 400, err: refused}, fatal("vendor-400")},
		{"a fatal cause inside a transient one decides", &vendorStatusError{code: 503, err: &vendorStatusError{code: 400}}, fatal("vendor-400")},
		{"a transient cause inside a transient one: the outer decides", &vendorStatusError{code: 503, err: pgErr("57P03")}, transient("vendor-503")},
		{"canceled inside a cause", &vendorStatusError{code: 503, err: context.Canceled}, fatal("canceled")},
		{"wrapper: a network error inside decides", &vendorWrapError{err: errors.Join(refused)}, transient("conn-refused")},
		{"wrapper: a cause inside decides over its own status", &vendorWrapError{code: 401, err: &vendorStatusError{code: 503}}, transient("vendor-503")},
		{"wrapper: its own status when nothing inside is recognised", &vendorWrapError{code: 403, err: errors.New(secret)}, fatal("vendor-403")},
		{"wrapper without a verdict and an unknown cause", &vendorWrapError{err: errors.New(secret)}, fatal("unknown")},
		{"wrapper: tls inside", &vendorWrapError{code: 503, err: &vendorWrapError{err: unknownCA}}, fatal("tls-verification")},
		{"fatal beats transient across a join", errors.Join(refused, &vendorWrapError{code: 403}), fatal("vendor-403")},
		{"through pgx: refused on one host, a vendor 403 on the other", viaPgx(t, refused, &vendorWrapError{code: 403}), fatal("vendor-403")},
		{"through pgx: a vendor 503", viaPgx(t, &vendorWrapError{code: 503}), transient("vendor-503")},
		{"200 wrappers deep", nest(&vendorStatusError{code: 503}, 200), fatal("too-complex")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := withVendor.Classify(tt.err); got != tt.want {
				t.Fatalf("Classify() = %v, want %v", got, tt.want)
			}
		})
	}
}

// Without the type rules, the vendor's types are unknown: the package
// function and a plain Classifier know no vendor.
func TestTypeRulesAreOptIn(t *testing.T) {
	t.Parallel()
	for _, err := range []error{&vendorStatusError{code: 503}, &vendorWrapError{code: 503}, &vendorConfigError{}} {
		if got := classify.Classify(err); got != fatal("unknown") {
			t.Errorf("Classify(%T) = %v, want fatal/unknown", err, got)
		}
		if got := classify.New().Classify(err); got != fatal("unknown") {
			t.Errorf("New().Classify(%T) = %v, want fatal/unknown", err, got)
		}
		if got := withVendor.Classify(err); got == fatal("unknown") {
			t.Errorf("withVendor.Classify(%T) = %v, want a verdict", err, got)
		}
	}
}

func TestWithTypes(t *testing.T) {
	t.Parallel()
	status := &vendorStatusError{code: 503}

	var nilClassifier *classify.Classifier
	if got := nilClassifier.WithTypes(vendorTypes...).Classify(status); got != transient("vendor-503") {
		t.Errorf("(*Classifier)(nil).WithTypes: %v, want transient/vendor-503", got)
	}
	// Rules run before type rules.
	all := func(error) (classify.Verdict, bool) { return fatal("all"), true }
	if got := classify.New(all).WithTypes(vendorTypes...).Classify(status); got != fatal("all") {
		t.Errorf("rules and types: %v, want fatal/all", got)
	}
	// A TypeRule with a nil Match never matches.
	if got := classify.New().WithTypes(classify.TypeRule{Kind: classify.Cause}).Classify(status); got != fatal("unknown") {
		t.Errorf("nil Match: %v, want fatal/unknown", got)
	}
	// The first matching rule of a kind wins; later WithTypes calls add
	// after the earlier ones and leave the base Classifier as it was.
	override := classify.TypeRule{Kind: classify.Cause, Match: func(err error) (classify.Verdict, bool) {
		if _, ok := classify.NodeAs[*vendorStatusError](err); ok {
			return transient("override"), true
		}
		return classify.Verdict{}, false
	}}
	first := classify.New().WithTypes(override)
	if got := first.WithTypes(vendorTypes...).Classify(status); got != transient("override") {
		t.Errorf("earlier rule: %v, want transient/override", got)
	}
	if got := withVendor.WithTypes(override).Classify(status); got != transient("vendor-503") {
		t.Errorf("later rule: %v, want transient/vendor-503", got)
	}
	if got := withVendor.Classify(&vendorConfigError{}); got != fatal("vendor-config") {
		t.Errorf("base after WithTypes: %v", got)
	}
	if got := first.Classify(&vendorConfigError{}); got != fatal("unknown") {
		t.Errorf("WithTypes changed its receiver: %v", got)
	}
}

func TestNodeAs(t *testing.T) {
	t.Parallel()
	status := &vendorStatusError{code: 503}
	if e, ok := classify.NodeAs[*vendorStatusError](status); !ok || e != status {
		t.Errorf("NodeAs on the node itself = %v, %v", e, ok)
	}
	if _, ok := classify.NodeAs[*vendorStatusError](fmt.Errorf("x: %w", status)); ok {
		t.Error("NodeAs unwrapped a wrapper")
	}
	if e, ok := classify.NodeAs[*vendorStatusError](vendorAs{429}); !ok || e.code != 429 {
		t.Errorf("NodeAs through an As method = %v, %v", e, ok)
	}
	var nilStatus *vendorStatusError
	if _, ok := classify.NodeAs[*vendorStatusError](nilStatus); ok {
		t.Error("NodeAs matched a nil pointer")
	}
}
