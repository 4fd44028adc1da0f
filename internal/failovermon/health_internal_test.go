package failovermon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestReaderDown: only a server that does not answer is a reader down —
// not one that refuses the monitor's role or password.
func TestReaderDown(t *testing.T) {
	t.Parallel()
	opErr := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
	}
	for _, tt := range []struct {
		err  error
		why  string
		down bool
	}{
		{opErr(syscall.ECONNREFUSED), "refused", true},
		{fmt.Errorf("connect: %w", opErr(syscall.ECONNREFUSED)), "refused", true},
		{opErr(syscall.ECONNRESET), "reset", true},
		{context.DeadlineExceeded, "timeout", true},
		{fmt.Errorf("read: %w", io.EOF), "EOF", true},
		{io.ErrUnexpectedEOF, "EOF", true},
		{&pgconn.PgError{Code: "57P03"}, "SQLSTATE 57P03", true},
		{&pgconn.PgError{Code: "57P01"}, "SQLSTATE 57P01", true},
		{&net.OpError{Op: "read", Net: "tcp", Err: errors.New("no route to host")}, "network error", true},
		{&pgconn.PgError{Code: "28P01"}, "", false}, // bad password
		{&pgconn.PgError{Code: "28000"}, "", false},
		{&pgconn.PgError{Code: "42501"}, "", false}, // unreadable: the role may not read the topology
		{errDialBackoff, "", false},
		{&hookError{opErr(syscall.ECONNREFUSED)}, "", false}, // the password fetch's, not the server's
		{errors.New("something else"), "", false},
		{nil, "", false},
	} {
		why, down := readerDown(tt.err)
		if why != tt.why || down != tt.down {
			t.Errorf("readerDown(%v) = %q, %v; want %q, %v", tt.err, why, down, tt.why, tt.down)
		}
	}
}
