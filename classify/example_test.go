package classify_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/classify"
)

func ExampleClassify() {
	errs := []error{
		// A dial to a port nobody listens on.
		&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)},
		// The server is restarting.
		fmt.Errorf("server error: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P03"}),
		// Wrong password.
		&pgconn.PgError{Severity: "FATAL", Code: "28P01"},
		// A DNS server that timed out.
		&net.DNSError{Err: "i/o timeout", Name: "db.example.com", IsTimeout: true},
		// Something nobody recognises.
		errors.New("something odd"),
	}
	for _, err := range errs {
		v := classify.Classify(err)
		fmt.Println(v.Retryable(), v.Reason)
	}
	// Output:
	// true conn-refused
	// true sqlstate-57P03
	// false sqlstate-28P01
	// true dns-temporary
	// false unknown
}

// proxyError is a sidecar proxy's error type that classify does not know:
// Busy means "try again", anything else is a configuration mistake.
type proxyError struct {
	Busy bool
	Err  error
}

func (e *proxyError) Error() string { return "proxy: " + e.Err.Error() }
func (e *proxyError) Unwrap() error { return e.Err }

func ExampleClassifier_WithTypes() {
	c := classify.New().WithTypes(classify.TypeRule{
		// A wrapper: a network error inside it still decides.
		Kind: classify.Wrapper,
		Match: func(err error) (classify.Verdict, bool) {
			e, ok := classify.NodeAs[*proxyError](err)
			switch {
			case !ok:
				return classify.Verdict{}, false
			case e.Busy:
				return classify.Verdict{Class: classify.Transient, Reason: "proxy-busy"}, true
			default:
				return classify.Verdict{Class: classify.Fatal, Reason: "proxy-config"}, true
			}
		},
	})
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	fmt.Println(c.Classify(&proxyError{Busy: true, Err: errors.New("queue full")}))
	fmt.Println(c.Classify(&proxyError{Err: errors.New("no route")}))
	fmt.Println(c.Classify(&proxyError{Err: refused}))
	// Output:
	// transient/proxy-busy
	// fatal/proxy-config
	// transient/conn-refused
}

// errMaintenance is an application error the built-in rules do not know.
var errMaintenance = errors.New("maintenance window")

func ExampleNew() {
	c := classify.New(
		classify.Sentinel(errMaintenance, classify.Verdict{Class: classify.Transient, Reason: "maintenance"}),
		func(err error) (classify.Verdict, bool) {
			// Treat "too many connections" as fatal in this application.
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "53300" {
				return classify.Verdict{Class: classify.Fatal, Reason: "no-more-connections"}, true
			}
			return classify.Verdict{}, false
		},
	)
	fmt.Println(c.Classify(fmt.Errorf("connect: %w", errMaintenance)))
	fmt.Println(c.Classify(&pgconn.PgError{Code: "53300"}))
	fmt.Println(c.Classify(syscall.ECONNRESET)) // no rule matched: built-in rules
	// Output:
	// transient/maintenance
	// fatal/no-more-connections
	// transient/conn-reset
}

func ExampleSQLState() {
	fmt.Println(classify.SQLState("57P01"))
	fmt.Println(classify.SQLState("40001"))
	// Output:
	// transient/sqlstate-57P01
	// fatal/sqlstate-40001
}
