package holdfast

import (
	"errors"
	"fmt"

	"github.com/holdfast-db/holdfast/classify"
)

// PanicError is what a connect returns when the password function
// (WithPasswordFunc, an integration's) panicked. The password function runs
// on pgxpool's connect goroutine, where a panic would end the process; a
// token SDK's bug should cost one connection, not the service. holdfast
// recovers it, logs the value and the stack at ERROR, and returns this
// error, which is Fatal (reason "panic"): it is not retried.
type PanicError struct {
	Value any    // what the function panicked with
	Stack []byte // the goroutine's stack at the panic
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("holdfast: the password function panicked: %v", e.Value)
}

// ReasonPanic is the classify reason of a *PanicError.
const ReasonPanic = "panic"

// panicRule classifies a *PanicError as Fatal.
func panicRule(err error) (classify.Verdict, bool) {
	var pe *PanicError
	if errors.As(err, &pe) {
		return classify.Verdict{Class: classify.Fatal, Reason: ReasonPanic}, true
	}
	return classify.Verdict{}, false
}
