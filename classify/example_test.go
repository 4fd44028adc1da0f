package classify_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"cloud.google.com/go/cloudsqlconn/errtype"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/api/googleapi"

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
		// The Cloud SQL Admin API is briefly unavailable.
		fmt.Errorf("failed to get instance: %w",
			errtype.NewRefreshError("failed to get instance metadata", "proj:region:inst", &googleapi.Error{Code: 503})),
		// The caller may not use the instance.
		errtype.NewRefreshError("failed to get instance metadata", "proj:region:inst", &googleapi.Error{Code: 403}),
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
	// true admin-api-503
	// false permission-denied
	// false unknown
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
