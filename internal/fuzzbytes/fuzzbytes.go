// Package fuzzbytes holds what the fuzz tests of the classifiers share
// (classify's FuzzClassify, and FuzzTypeRules of cloudsql and alloydb):
// the reader of the fuzz bytes that build their error trees, a wrapper
// that does not format what it wraps, and the shape of a Reason.
package fuzzbytes

import "regexp"

// Reader hands out fuzz bytes one at a time.
type Reader struct{ data []byte }

// Reset makes r read data.
func (r *Reader) Reset(data []byte) { r.data = data }

// More reports whether bytes are left.
func (r *Reader) More() bool { return len(r.data) > 0 }

// Next returns the next byte, 0 when there is none.
func (r *Reader) Next() byte {
	if len(r.data) == 0 {
		return 0
	}
	c := r.data[0]
	r.data = r.data[1:]
	return c
}

var fuzzStatus = []int{400, 401, 403, 404, 408, 429, 500, 502, 503, 504}

// Code returns an HTTP status: bytes 0-9 pick a common one, others give
// 310..555.
func (r *Reader) Code() int {
	c := int(r.Next())
	if c < len(fuzzStatus) {
		return fuzzStatus[c]
	}
	return 300 + c
}

// LazyWrap wraps Err without formatting it at construction, so a chain
// holding an error whose Error panics can be built (fmt.Errorf would call
// Error, which is also exponential in the depth of shared joins); its own
// Error calls Err's, with Prefix before it.
type LazyWrap struct {
	Prefix string
	Err    error
}

func (w LazyWrap) Error() string { return w.Prefix + ": " + w.Err.Error() }
func (w LazyWrap) Unwrap() error { return w.Err }

// ReasonRE is the shape of every built-in Reason: a short machine-readable
// token.
var ReasonRE = regexp.MustCompile(`^[a-z0-9]+(-[a-zA-Z0-9]+)*$`)
