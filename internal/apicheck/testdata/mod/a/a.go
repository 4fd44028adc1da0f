// Package a has one of each kind of feature.
package a

import (
	"io"
	"strings"
	"time"

	"example.com/mod/a/internal/c"
)

// Typed and untyped constants, a long string, a float.
const (
	Timeout  time.Duration = 2 * time.Second
	Retries                = 3
	Name                   = "a"
	Long                   = "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
	Ratio                  = 1.0 / 3
	Letter                 = 'x'
	on, Flag               = false, true
)

// Err is a var.
var Err error = io.EOF

// Deprecated: use Err.
var OldErr = Err

// New is variadic.
func New(opts ...Option) (*T, error) { return nil, nil }

// Map has type parameters.
func Map[K comparable, V any](m map[K]V, f func(K, V) V) []V { return nil }

// Old is deprecated.
//
// Deprecated: use New.
func Old() {}

// Option is a func type.
type Option func(*T)

// T is a struct.
type T struct {
	Exported  int
	hidden    int
	A, B      []byte
	Ch        <-chan rune
	Inner     struct{ X int }
	c.Promote // its methods are T's
	*strings.Reader
	// Deprecated: gone soon.
	Gone string
}

// Close has a pointer receiver.
func (*T) Close() error { return nil }

// Value has a value receiver.
func (T) Value() int { return 0 }

func (T) unexported() {}

// Deprecated: use Close.
func (t *T) Stop() {}

// I is an interface, with one embedded.
type I interface {
	io.Closer
	Do(x int) (int, error)
}

// Sealed has an unexported method.
type Sealed interface {
	Exported()
	sealed()
}

// Empty is empty.
type Empty interface{}

// Number is a constraint.
type Number interface {
	~int | ~int64 | float64
}

// Alias is an alias.
type Alias = map[string][]*T

// Mode is a defined basic type.
type Mode uint8

// String is Mode's.
func (m Mode) String() string { return "" }

// List is generic.
type List[E any, P Number] struct {
	Items []E
}

// Push has a receiver with type parameters.
func (l *List[E, P]) Push(e E) {}

type hidden struct{}

// Exported on an unexported type: not counted, not listed.
func (hidden) Exported() {}

// Fn uses an interface literal and a chan of funcs.
var Fn func(interface{ Len() int }, chan<- func()) [4]any

// Pub makes an internal type part of the API: its fields and methods are
// listed under Pub.
type Pub = c.Promote

// Dur is an alias of a type listed elsewhere.
type Dur = time.Duration
