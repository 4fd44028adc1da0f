package classify_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/classify"
)

// secret appears in every message built by these tests; no Reason may
// contain it.
const secret = "p4ssw0rd"

func fatal(reason string) classify.Verdict {
	return classify.Verdict{Class: classify.Fatal, Reason: reason}
}

func transient(reason string) classify.Verdict {
	return classify.Verdict{Class: classify.Transient, Reason: reason}
}

func pgErr(code string) *pgconn.PgError {
	return &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: secret}
}

// syscallErr is what a failed dial or read on a TCP socket returns.
func syscallErr(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}
}

func urlErr(err error) error {
	return &url.Error{Op: "Post", URL: "https://auth.example/token?" + secret, Err: err}
}

// timeoutErr is a net.Error with Timeout() true that is not a *net.OpError.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "custom timeout " + secret }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// canceledLike matches context.Canceled through an Is method.
type canceledLike struct{}

func (canceledLike) Error() string        { return "stopping " + secret }
func (canceledLike) Is(target error) bool { return target == context.Canceled }

// pgAs exposes a *pgconn.PgError through an As method only.
type pgAs struct{ code string }

func (e pgAs) Error() string { return "wrapped " + secret }
func (e pgAs) As(target any) bool {
	if p, ok := target.(**pgconn.PgError); ok {
		*p = pgErr(e.code)
		return true
	}
	return false
}

// viaPgx returns the error pgconn.ConnectConfig reports when its dial to host
// i fails with dialErrs[i]: a *pgconn.ConnectError whose Unwrap is
// errors.Join over the per-host errors.
func viaPgx(t *testing.T, dialErrs ...error) error {
	t.Helper()
	hosts := make([]string, len(dialErrs))
	byAddr := map[string]error{}
	for i, e := range dialErrs {
		hosts[i] = fmt.Sprintf("10.0.0.%d", i+1)
		byAddr[hosts[i]+":5432"] = e
	}
	cfg, err := pgconn.ParseConfig("host=" + strings.Join(hosts, ",") + " user=u dbname=d sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	cfg.DialFunc = func(_ context.Context, _, addr string) (net.Conn, error) {
		if e, ok := byAddr[addr]; ok {
			return nil, e
		}
		return nil, fmt.Errorf("unexpected address %s", addr)
	}
	conn, err := pgconn.ConnectConfig(context.Background(), cfg)
	if err == nil {
		conn.Close(context.Background())
		t.Fatal("connect succeeded")
	}
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("got %T, want *pgconn.ConnectError", err)
	}
	return err
}

// nest wraps err n times with fmt.Errorf.
func nest(err error, n int) error {
	for i := 0; i < n; i++ {
		err = fmt.Errorf("layer %d: %w", i, err)
	}
	return err
}

// doubling returns a tree of 2^n leaves built from n nested errors.Join(e, e).
func doubling(leaf error, n int) error {
	e := leaf
	for i := 0; i < n; i++ {
		e = errors.Join(e, e)
	}
	return e
}

func TestClassify(t *testing.T) {
	t.Parallel()

	refused := syscallErr("dial", syscall.ECONNREFUSED)
	unknownCA := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	var nilPg *pgconn.PgError

	tests := []struct {
		name string
		err  error
		want classify.Verdict
	}{
		{"nil", nil, fatal("no-error")},
		{"plain string error", errors.New(secret), fatal("unknown")},
		{"fmt without %w", fmt.Errorf("connection refused %s", secret), fatal("unknown")},
		{"auto IAM not supported (string only)", fmt.Errorf("SQLSERVER_2019 does not support Auto IAM DB Authentication"), fatal("unknown")},

		// SQLSTATE rows, each as pgx returns it (possibly wrapped).
		{"sqlstate 08000", pgErr("08000"), transient("sqlstate-08000")},
		{"sqlstate 08001", pgErr("08001"), transient("sqlstate-08001")},
		{"sqlstate 08003", pgErr("08003"), transient("sqlstate-08003")},
		{"sqlstate 08004", pgErr("08004"), transient("sqlstate-08004")},
		{"sqlstate 08006 wrapped", fmt.Errorf("server error: %w", pgErr("08006")), transient("sqlstate-08006")},
		{"sqlstate 08007 transaction_resolution_unknown", pgErr("08007"), fatal("sqlstate-08007")},
		{"sqlstate 08P01 protocol_violation", pgErr("08P01"), fatal("sqlstate-08P01")},
		{"sqlstate 53000", pgErr("53000"), transient("sqlstate-53000")},
		{"sqlstate 53200", pgErr("53200"), transient("sqlstate-53200")},
		{"sqlstate 53300 too_many_connections", pgErr("53300"), transient("sqlstate-53300")},
		{"sqlstate 53100 disk_full", pgErr("53100"), fatal("sqlstate-53100")},
		{"sqlstate 53400", pgErr("53400"), fatal("sqlstate-53400")},
		{"sqlstate 57P01 admin_shutdown", pgErr("57P01"), transient("sqlstate-57P01")},
		{"sqlstate 57P02", pgErr("57P02"), transient("sqlstate-57P02")},
		{"sqlstate 57P03 cannot_connect_now", pgErr("57P03"), transient("sqlstate-57P03")},
		{"sqlstate 57P05", pgErr("57P05"), transient("sqlstate-57P05")},
		{"sqlstate 57014 query_canceled", pgErr("57014"), fatal("sqlstate-57014")},
		{"sqlstate 57P04 database_dropped", pgErr("57P04"), fatal("sqlstate-57P04")},
		{"sqlstate 28000", pgErr("28000"), fatal("sqlstate-28000")},
		{"sqlstate 28P01", pgErr("28P01"), fatal("sqlstate-28P01")},
		{"sqlstate 3D000", pgErr("3D000"), fatal("sqlstate-3D000")},
		{"sqlstate 42501", pgErr("42501"), fatal("sqlstate-42501")},
		{"sqlstate 42601", pgErr("42601"), fatal("sqlstate-42601")},
		{"sqlstate 42P01", pgErr("42P01"), fatal("sqlstate-42P01")},
		{"sqlstate 23505", pgErr("23505"), fatal("sqlstate-23505")},
		{"sqlstate 23503", pgErr("23503"), fatal("sqlstate-23503")},
		{"sqlstate 22012", pgErr("22012"), fatal("sqlstate-22012")},
		{"sqlstate 22P02", pgErr("22P02"), fatal("sqlstate-22P02")},
		{"sqlstate 0A000", pgErr("0A000"), fatal("sqlstate-0A000")},
		{"sqlstate 25006", pgErr("25006"), fatal("sqlstate-25006")},
		{"sqlstate 25P02", pgErr("25P02"), fatal("sqlstate-25P02")},
		{"sqlstate 40001 (whole-tx retry is the caller's)", pgErr("40001"), fatal("sqlstate-40001")},
		{"sqlstate 40P01", pgErr("40P01"), fatal("sqlstate-40P01")},
		{"sqlstate XX000", pgErr("XX000"), fatal("sqlstate-XX000")},
		{"sqlstate other code 58030", pgErr("58030"), fatal("sqlstate-58030")},
		{"sqlstate malformed code", pgErr("08006 " + secret), fatal("sqlstate-invalid")},
		{"sqlstate lower-case code", pgErr("57p01"), fatal("sqlstate-invalid")},
		{"PgError through an As method", fmt.Errorf("x: %w", pgAs{"57P03"}), transient("sqlstate-57P03")},
		{"typed nil PgError", nilPg, fatal("unknown")},

		// Network.
		{"dial refused", refused, transient("conn-refused")},
		{"read reset", syscallErr("read", syscall.ECONNRESET), transient("conn-reset")},
		{"write broken pipe", syscallErr("write", syscall.EPIPE), transient("broken-pipe")},
		{"conn aborted", syscallErr("read", syscall.ECONNABORTED), transient("conn-aborted")},
		{"host unreachable", syscallErr("dial", syscall.EHOSTUNREACH), transient("host-unreachable")},
		{"net unreachable", syscallErr("dial", syscall.ENETUNREACH), transient("net-unreachable")},
		{"dial ETIMEDOUT", syscallErr("dial", syscall.ETIMEDOUT), transient("timeout")},
		{"other errno", syscallErr("dial", syscall.EACCES), fatal("unknown")},
		{"bare errno", syscall.ECONNREFUSED, transient("conn-refused")},
		{"io.EOF", fmt.Errorf("receive message: %w", io.EOF), transient("eof")},
		{"io.ErrUnexpectedEOF", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), transient("eof")},
		{"context.DeadlineExceeded raw", context.DeadlineExceeded, transient("timeout")},
		{"os.ErrDeadlineExceeded in OpError", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, transient("timeout")},
		{"OpError with custom timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, transient("timeout")},
		{"custom net.Error timeout alone is not enough", timeoutErr{}, fatal("unknown")},
		{"OpError without timeout or known errno", &net.OpError{Op: "read", Net: "tcp", Err: errors.New(secret)}, fatal("unknown")},
		{"DNS not found", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: secret, IsNotFound: true}}, fatal("dns-not-found")},
		{"DNS temporary", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "server misbehaving", IsTemporary: true}}, transient("dns-temporary")},
		{"DNS timeout", &net.DNSError{Err: "i/o timeout", IsTimeout: true}, transient("dns-temporary")},
		{"DNS other", &net.DNSError{Err: "weird"}, transient("dns-error")},
		{"DNS canceled by ctx", &net.DNSError{Err: "operation was canceled", UnwrapErr: context.Canceled}, fatal("canceled")},
		{"url.Error is a net.Error but not a network failure", urlErr(errors.New(secret)), fatal("unknown")},
		{"pgconn.ErrConnClosed", fmt.Errorf("query: %w", pgconn.ErrConnClosed), transient("conn-closed")},

		// Context and ordering.
		{"refresh ctx expired", fmt.Errorf("refresh failed: %w", context.DeadlineExceeded), transient("timeout")},
		{"canceled", fmt.Errorf("dial: %w", context.Canceled), fatal("canceled")},
		{"canceled via Is method", fmt.Errorf("x: %w", canceledLike{}), fatal("canceled")},
		{"canceled beats refused", errors.Join(refused, context.Canceled), fatal("canceled")},
		{"canceled beats tls", errors.Join(unknownCA, context.Canceled), fatal("canceled")},
		{"tls beats refused in a join", errors.Join(refused, unknownCA), fatal("tls-verification")},
		{"fatal sqlstate beats earlier transient", errors.Join(refused, pgErr("28P01")), fatal("sqlstate-28P01")},
		{"first transient wins among transients", errors.Join(pgErr("57P03"), refused, pgErr("53300")), transient("sqlstate-57P03")},
		{"unrecognised causes are ignored next to a recognised one", errors.Join(errors.New(secret), refused), transient("conn-refused")},

		// TLS.
		{"x509 hostname", &tls.CertificateVerificationError{Err: x509.HostnameError{Host: secret}}, fatal("tls-verification")},
		{"x509 expired", fmt.Errorf("tls error: %w", x509.CertificateInvalidError{Reason: x509.Expired}), fatal("tls-verification")},
		{"x509 unknown authority alone", x509.UnknownAuthorityError{}, fatal("tls-verification")},

		// Through pgx's own wrapping (ConnectError → Join[perDialConnectError → …]).
		{"pgx: 57P03 while the server starts", viaPgx(t, pgErr("57P03")), transient("sqlstate-57P03")},
		{"pgx: two hosts refused and reset", viaPgx(t, refused, syscallErr("dial", syscall.ECONNRESET)), transient("conn-refused")},
		{"pgx: one host refused, one denied", viaPgx(t, refused, pgErr("42501")), fatal("sqlstate-42501")},
		{"pgx: net.Error timeout (pgconn errTimeout)", viaPgx(t, timeoutErr{}), transient("timeout")},
		{"pgx: dial canceled", viaPgx(t, fmt.Errorf("dial: %w", context.Canceled)), fatal("canceled")},

		// Limits.
		{"50 wrappers deep", nest(refused, 50), transient("conn-refused")},
		{"200 wrappers deep", nest(refused, 200), fatal("too-complex")},
		{"200 wrappers deep, fatal near the top", errors.Join(pgErr("28P01"), nest(refused, 200)), fatal("too-complex")},
		{"2^60 leaves through shared joins", doubling(refused, 60), fatal("too-complex")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := classify.Classify(tt.err)
			if got != tt.want {
				t.Fatalf("Classify() = %v, want %v", got, tt.want)
			}
			if got.Retryable() != (tt.want.Class == classify.Transient) {
				t.Fatalf("Retryable() = %v for %v", got.Retryable(), got)
			}
			if strings.Contains(got.Reason, secret) {
				t.Fatalf("Reason %q contains message text", got.Reason)
			}
			// A nil *Classifier, and one without rules, behave as the
			// package function.
			var c *classify.Classifier
			if got2 := c.Classify(tt.err); got2 != got {
				t.Fatalf("(*Classifier)(nil).Classify() = %v, want %v", got2, got)
			}
			if got2 := classify.New().Classify(tt.err); got2 != got {
				t.Fatalf("New().Classify() = %v, want %v", got2, got)
			}
		})
	}
}

// panicky is an error whose Error panics, as some libraries' errors do when
// a field is unset (auth.Error without a Response, in Google's).
type panicky struct{ err error }

func (panicky) Error() string   { panic("Error called") }
func (p panicky) Unwrap() error { return p.err }

func TestClassifyDoesNotCallError(t *testing.T) {
	t.Parallel()
	refused := syscallErr("dial", syscall.ECONNREFUSED)
	for _, tt := range []struct {
		err  error
		want classify.Verdict
	}{
		{panicky{}, fatal("unknown")},
		{panicky{err: refused}, transient("conn-refused")},
		{errors.Join(panicky{}, pgErr("28P01")), fatal("sqlstate-28P01")},
		{&net.OpError{Op: "dial", Net: "tcp", Err: panicky{err: context.Canceled}}, fatal("canceled")},
		{panicky{err: &vendorWrapError{code: 503, err: panicky{}}}, transient("vendor-503")},
	} {
		// withVendor: the built-in rules and type rules alike.
		if got := withVendor.Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%#v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestClassifyDeepTreeIsFast(t *testing.T) {
	t.Parallel()
	// errors.Is on this tree would visit 2^60 nodes; Classify must stop early.
	err := doubling(syscall.ECONNREFUSED, 60)
	done := make(chan classify.Verdict, 1)
	go func() { done <- classify.Classify(err) }()
	select {
	case got := <-done:
		if got.Reason != "too-complex" {
			t.Fatalf("got %v, want fatal/too-complex", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Classify did not return within 10s on a shared-join tree")
	}
}

func TestSQLState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code string
		want classify.Verdict
	}{
		{"57P01", transient("sqlstate-57P01")},
		{"08006", transient("sqlstate-08006")},
		{"08P01", fatal("sqlstate-08P01")},
		{"42501", fatal("sqlstate-42501")},
		{"", fatal("sqlstate-invalid")},
		{"5701", fatal("sqlstate-invalid")},
		{"57P01x", fatal("sqlstate-invalid")},
		{"57-01", fatal("sqlstate-invalid")},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			t.Parallel()
			if got := classify.SQLState(tt.code); got != tt.want {
				t.Fatalf("SQLState(%q) = %v, want %v", tt.code, got, tt.want)
			}
		})
	}
}

func TestClassString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		c    classify.Class
		want string
	}{
		{classify.Fatal, "fatal"},
		{classify.Transient, "transient"},
		{classify.Class(7), "Class(7)"},
	}
	for _, tt := range tests {
		if got := tt.c.String(); got != tt.want {
			t.Errorf("Class(%d).String() = %q, want %q", int(tt.c), got, tt.want)
		}
	}
	var zero classify.Verdict
	if zero.Retryable() || zero.Class != classify.Fatal {
		t.Errorf("zero Verdict = %v, want fatal and not retryable", zero)
	}
	if (classify.Verdict{Class: classify.Class(7)}).Retryable() {
		t.Error("an out-of-range Class must not be retryable")
	}
	if got := transient("conn-refused").String(); got != "transient/conn-refused" {
		t.Errorf("Verdict.String() = %q", got)
	}
}
