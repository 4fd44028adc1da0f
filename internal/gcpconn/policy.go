package gcpconn

import (
	"reflect"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/retry"
)

// DialTimeout bounds each Dial of a Google connector (an earlier deadline
// of the caller's context still wins): 12s, above the Cloud SQL connector's
// own retry of Admin API 5xx answers (8.5s at most) and room for about five
// of the AlloyDB connector's retries of an Admin API 503.
const DialTimeout = 12 * time.Second

// RetryPolicy is the holdfast retry policy of packages cloudsql and
// alloydb: 2 attempts, 250ms doubling to at most 1s with 20% jitter, each
// attempt bounded by DialTimeout, 30s overall. Their docs say why.
func RetryPolicy() retry.Policy {
	return retry.Policy{
		MaxAttempts:     2,
		InitialInterval: 250 * time.Millisecond,
		Multiplier:      2,
		Jitter:          0.2,
		MaxInterval:     time.Second,
		AttemptTimeout:  DialTimeout,
		MaxElapsed:      30 * time.Second,
	}
}

// StartupPolicy is the policy of a pool's first connection in packages
// cloudsql and alloydb: 3 attempts, 1s doubling to at most 5s with 20%
// jitter, 90s overall, no per-attempt timeout.
func StartupPolicy() retry.Policy {
	return retry.Policy{
		MaxAttempts:     3,
		InitialInterval: time.Second,
		Multiplier:      2,
		Jitter:          0.2,
		MaxInterval:     5 * time.Second,
		MaxElapsed:      90 * time.Second,
	}
}

// Limits of FindNode's walk, as package classify's: beyond them it finds
// nothing, and classify's built-in rules answer "too-complex".
const (
	maxDepth = 64
	maxNodes = 1024
)

// FindNode is errors.As for T (the first one, depth first) within the walk
// limits, without calling Unwrap on a nil pointer, which panics for the
// connectors' error types. errors.As itself would panic on such a node,
// and would take time exponential in the depth of errors.Join(e, e) nested
// in itself.
func FindNode[T any](err error) (T, bool) {
	nodes := 0
	return findNode[T](err, 0, &nodes)
}

func findNode[T any](err error, depth int, nodes *int) (T, bool) {
	var zero T
	if err == nil || depth > maxDepth {
		return zero, false
	}
	if *nodes++; *nodes > maxNodes {
		return zero, false
	}
	if v := reflect.ValueOf(err); v.Kind() == reflect.Pointer && v.IsNil() {
		return zero, false
	}
	if e, ok := classify.NodeAs[T](err); ok {
		return e, true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return findNode[T](u.Unwrap(), depth+1, nodes)
	case interface{ Unwrap() []error }:
		for _, c := range u.Unwrap() {
			if e, ok := findNode[T](c, depth+1, nodes); ok {
				return e, true
			}
		}
	}
	return zero, false
}
