package fakes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/holdfast-db/holdfast/fakes"
	"github.com/jackc/pgx/v5/pgconn"
)

var _ pgconn.DialFunc = (*fakes.Connector)(nil).Dial

var payload = []byte("0123456789")

// chain lists the dynamic types of err and of everything it wraps, outermost
// first, calling Error() at every level (which must not panic).
func chain(err error) []string {
	var types []string
	for err != nil {
		_ = err.Error()
		types = append(types, fmt.Sprintf("%T", err))
		err = errors.Unwrap(err)
	}
	return types
}

// statusError is the error of a status step: a failure with an HTTP-like
// status, at a dial or at a password fetch.
type statusError struct {
	at   string // "dial" or "password"
	code int
}

func (e *statusError) Error() string { return e.at + " failed with status " + strconv.Itoa(e.code) }

// status is a step defined with Custom, as packages outside fakes define
// theirs (package cloudsqltest's TokenFetch, for one).
func status(code int) fakes.Step {
	return fakes.Custom("status("+strconv.Itoa(code)+")",
		func() error { return &statusError{"dial", code} },
		func() error { return &statusError{"password", code} })
}

func TestConnectorSteps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		step    fakes.Step
		wantErr bool
		check   func(t *testing.T, s *server, conn net.Conn, err error)
	}{
		{
			name: "Connect dials the target, not the address asked for",
			step: fakes.Connect(),
			check: func(t *testing.T, s *server, conn net.Conn, err error) {
				if got := conn.RemoteAddr().String(); got != s.addr {
					t.Errorf("RemoteAddr = %s, want the target %s", got, s.addr)
				}
				got := make([]byte, len(payload))
				if _, err := io.ReadFull(conn, got); err != nil || !bytes.Equal(got, payload) {
					t.Errorf("read %q, %v; want %q", got, err, payload)
				}
			},
		},
		{
			name:    "Refused",
			step:    fakes.Refused(),
			wantErr: true,
			check: func(t *testing.T, s *server, conn net.Conn, err error) {
				if !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("errors.Is(%v, ECONNREFUSED) = false", err)
				}
				var op *net.OpError
				if !errors.As(err, &op) || op.Op != "dial" || op.Net != "tcp" || op.Addr.String() != s.addr {
					t.Errorf("err = %#v, want *net.OpError{Op: dial, Net: tcp, Addr: %s}", err, s.addr)
				}
				want := "dial tcp " + s.addr + ": connect: connection refused"
				if err.Error() != want {
					t.Errorf("Error() = %q, want %q", err.Error(), want)
				}
				if _, ok := op.Addr.(*net.TCPAddr); !ok {
					t.Errorf("Addr is %T, want *net.TCPAddr as net.Dialer reports", op.Addr)
				}
			},
		},
		{
			name:    "Custom fails with its dial error",
			step:    status(503),
			wantErr: true,
			check: func(t *testing.T, s *server, conn net.Conn, err error) {
				var se *statusError
				if !errors.As(err, &se) || se.at != "dial" || se.code != 503 {
					t.Errorf("err = %v, want the dial's *statusError 503", err)
				}
			},
		},
		{
			name:    "Custom without a dial error is a bad step",
			step:    fakes.Custom("pw-only", nil, func() error { return errSentinel }),
			wantErr: true,
			check: func(t *testing.T, s *server, conn net.Conn, err error) {
				if !errors.Is(err, fakes.ErrBadStep) || !strings.Contains(err.Error(), "pw-only") {
					t.Errorf("err = %v, want ErrBadStep naming the step", err)
				}
			},
		},
		{
			name:    "Custom whose dial error is nil is a bad step",
			step:    fakes.Custom("nil-error", func() error { return nil }, nil),
			wantErr: true,
			check: func(t *testing.T, s *server, conn net.Conn, err error) {
				if !errors.Is(err, fakes.ErrBadStep) {
					t.Errorf("err = %v, want ErrBadStep", err)
				}
			},
		},
		{
			name:    "Fail returns the error itself",
			step:    fakes.Fail(errSentinel),
			wantErr: true,
			check: func(t *testing.T, s *server, conn net.Conn, err error) {
				if err != errSentinel {
					t.Errorf("err = %v, want errSentinel itself", err)
				}
			},
		},
		{
			name:    "Fail(nil) is a bad step",
			step:    fakes.Fail(nil),
			wantErr: true,
			check: func(t *testing.T, s *server, conn net.Conn, err error) {
				if !errors.Is(err, fakes.ErrBadStep) {
					t.Errorf("err = %v, want ErrBadStep", err)
				}
			},
		},
		{
			name: "Reset: the first read is reset, and so is the server's side",
			step: fakes.Reset(),
			check: func(t *testing.T, s *server, conn net.Conn, _ error) {
				n, err := conn.Read(make([]byte, 100))
				assertReset(t, conn, n, err)
				if err := s.end(t); !errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("server read ended with %v, want ECONNRESET (a real TCP reset)", err)
				}
			},
		},
		{
			name: "ResetAfter(4): four bytes, then reset; writes fail after",
			step: fakes.ResetAfter(4),
			check: func(t *testing.T, s *server, conn net.Conn, _ error) {
				got := make([]byte, 4)
				if _, err := io.ReadFull(conn, got); err != nil || string(got) != "0123" {
					t.Fatalf("read %q, %v; want \"0123\"", got, err)
				}
				if _, err := conn.Write([]byte("before reset")); err != nil {
					t.Errorf("write before the reset: %v", err)
				}
				n, err := conn.Read(make([]byte, 100))
				assertReset(t, conn, n, err)
				n, err = conn.Read(make([]byte, 100))
				assertReset(t, conn, n, err) // and it stays reset
				_, err = conn.Write([]byte("x"))
				var op *net.OpError
				if !errors.Is(err, syscall.EPIPE) || !errors.As(err, &op) || op.Op != "write" {
					t.Errorf("write after the reset: %v, want write: broken pipe", err)
				}
				if err := s.end(t); !errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("server read ended with %v, want ECONNRESET", err)
				}
			},
		},
		{
			name: "ResetAfter delivers exactly n bytes to small reads",
			step: fakes.ResetAfter(3),
			check: func(t *testing.T, s *server, conn net.Conn, err error) {
				var got []byte
				b := make([]byte, 1)
				for {
					n, err := conn.Read(b)
					got = append(got, b[:n]...)
					if err != nil {
						if !errors.Is(err, syscall.ECONNRESET) {
							t.Fatalf("read error %v, want ECONNRESET", err)
						}
						break
					}
				}
				if string(got) != "012" {
					t.Errorf("read %q before the reset, want \"012\"", got)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, payload)
			c := fakes.NewConnector(s.addr, tt.step)
			conn, err := c.Dial(testCtx(t), "tcp", "192.0.2.1:5432") // TEST-NET-1: must never be dialed
			if (err != nil) != tt.wantErr {
				t.Fatalf("Dial: err = %v, want error: %v", err, tt.wantErr)
			}
			if err == nil {
				defer conn.Close()
			} else if conn != nil {
				t.Errorf("Dial returned a connection with an error")
			}
			tt.check(t, s, conn, err)
			wantFail := 0
			if tt.wantErr {
				wantFail = 1
			}
			if c.Attempts() != 1 || c.Failures() != wantFail || c.Successes() != 1-wantFail {
				t.Errorf("attempts/successes/failures = %d/%d/%d, want 1/%d/%d",
					c.Attempts(), c.Successes(), c.Failures(), 1-wantFail, wantFail)
			}
		})
	}
}

var errSentinel = errors.New("scripted failure")

func assertReset(t *testing.T, conn net.Conn, n int, err error) {
	t.Helper()
	if n != 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read = %d, %v; want 0, connection reset by peer", n, err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "read" || op.Net != "tcp" ||
		op.Source.String() != conn.LocalAddr().String() || op.Addr.String() != conn.RemoteAddr().String() {
		t.Errorf("err = %#v, want *net.OpError{Op: read, Net: tcp, Source: local, Addr: remote}", err)
	}
	var se *os.SyscallError
	if !errors.As(err, &se) || se.Syscall != "read" {
		t.Errorf("err = %v, want an *os.SyscallError for read", err)
	}
}

// outcome names the result of one dial for the script tests.
func outcome(conn net.Conn, err error) string {
	var se *statusError
	switch {
	case err == nil:
		conn.Close()
		return "connect"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.As(err, &se):
		return fmt.Sprintf("status%d", se.code)
	case errors.Is(err, errSentinel):
		return "fail"
	default:
		return "unexpected: " + err.Error()
	}
}

func TestScript(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		steps []fakes.Step
		want  []string
	}{
		{"empty script connects", nil, []string{"connect", "connect"}},
		{"zero Step is Connect", []fakes.Step{{}, fakes.Refused()}, []string{"connect", "refused", "connect"}},
		{"in order, then connect",
			[]fakes.Step{fakes.Refused(), fakes.Connect(), status(503), fakes.Fail(errSentinel)},
			[]string{"refused", "connect", "status503", "fail", "connect", "connect"}},
		{"Times", []fakes.Step{fakes.Refused().Times(3), status(403)},
			[]string{"refused", "refused", "refused", "status403", "connect"}},
		{"Times(0) and negative skip the step",
			[]fakes.Step{fakes.Refused().Times(0), status(403).Times(-1), status(503)},
			[]string{"status503", "connect"}},
		{"Forever", []fakes.Step{fakes.Connect(), status(404).Forever()},
			[]string{"connect", "status404", "status404", "status404", "status404"}},
		{"steps after Forever never play", []fakes.Step{fakes.Refused().Forever(), fakes.Connect()},
			[]string{"refused", "refused", "refused"}},
		{"Forever overrides Times", []fakes.Step{fakes.Refused().Times(1).Forever()},
			[]string{"refused", "refused", "refused"}},
		{"Times overrides Forever", []fakes.Step{fakes.Refused().Forever().Times(2)},
			[]string{"refused", "refused", "connect"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, nil)
			c := fakes.NewConnector(s.addr, tt.steps...)
			var got []string
			for range tt.want {
				got = append(got, outcome(c.Dial(testCtx(t), "tcp", "")))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("outcomes = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestScriptThenAndSet(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	steps := []fakes.Step{fakes.Refused(), fakes.Refused()}
	c := fakes.NewConnector(s.addr, steps...)
	steps[0] = status(403) // the Connector keeps its own copy
	dial := func() string { return outcome(c.Dial(testCtx(t), "tcp", "")) }

	if got := dial(); got != "refused" {
		t.Fatalf("dial 1 = %s, want refused", got)
	}
	c.Then(status(503))
	var got []string
	for range 3 {
		got = append(got, dial())
	}
	if want := []string{"refused", "status503", "connect"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after Then: %v, want %v", got, want)
	}

	c.Set(fakes.Refused().Forever())
	c.Then(fakes.Connect()) // after a Forever: never plays
	if got := dial(); got != "refused" {
		t.Errorf("after Set(Forever): %s, want refused", got)
	}
	c.Set(status(503), status(403))
	if got := dial(); got != "status503" {
		t.Errorf("after Set: %s, want api503", got)
	}
	c.Set()
	if got := dial(); got != "connect" {
		t.Errorf("after Set(): %s, want connect", got)
	}
	if c.Attempts() != 7 || c.Successes() != 2 || c.Failures() != 5 {
		t.Errorf("attempts/successes/failures = %d/%d/%d, want 7/2/5", c.Attempts(), c.Successes(), c.Failures())
	}
}

func TestHang(t *testing.T) {
	t.Parallel()
	t.Run("returns ctx.Err() once the context is canceled", func(t *testing.T) {
		t.Parallel()
		c := fakes.NewConnector("127.0.0.1:1", fakes.Hang())
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		ctx := &watchedCtx{Context: parent, watched: make(chan struct{})}
		type result struct {
			conn net.Conn
			err  error
		}
		done := make(chan result, 1)
		go func() {
			conn, err := c.Dial(ctx, "tcp", "")
			done <- result{conn, err}
		}()
		<-ctx.watched // the dial is waiting on ctx.Done()
		if c.Attempts() != 1 || c.Failures() != 0 || c.Successes() != 0 {
			t.Errorf("while hanging: attempts/successes/failures = %d/%d/%d, want 1/0/0",
				c.Attempts(), c.Successes(), c.Failures())
		}
		cancel()
		r := <-done
		if r.conn != nil || r.err != context.Canceled {
			t.Errorf("Dial = %v, %v; want nil, context.Canceled unwrapped", r.conn, r.err)
		}
		if c.Failures() != 1 {
			t.Errorf("Failures = %d, want 1", c.Failures())
		}
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, nil)
		c := fakes.NewConnector(s.addr, fakes.Hang())
		ctx, cancel := context.WithTimeout(context.Background(), 1)
		defer cancel()
		if _, err := c.Dial(ctx, "tcp", ""); err != context.DeadlineExceeded {
			t.Errorf("Dial: %v, want context.DeadlineExceeded", err)
		}
		conn, err := c.Dial(testCtx(t), "tcp", "")
		if err != nil {
			t.Fatalf("the dial after Hang: %v", err)
		}
		conn.Close()
	})
}

// watchedCtx closes watched when Done is first called.
type watchedCtx struct {
	context.Context
	once    sync.Once
	watched chan struct{}
}

func (c *watchedCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.watched) })
	return c.Context.Done()
}

func TestNoTarget(t *testing.T) {
	t.Parallel()
	var zero fakes.Connector
	for name, c := range map[string]*fakes.Connector{
		"zero Connector":   &zero,
		"empty target":     fakes.NewConnector(""),
		"Reset, no target": fakes.NewConnector("", fakes.Reset()),
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := c.Dial(testCtx(t), "tcp", "127.0.0.1:5432")
			if conn != nil || !errors.Is(err, fakes.ErrNoTarget) {
				t.Errorf("Dial = %v, %v; want ErrNoTarget", conn, err)
			}
			if c.Failures() != 1 {
				t.Errorf("Failures = %d, want 1", c.Failures())
			}
		})
	}
}

// TestConcurrentDials: every dial takes exactly one play, even when 100
// goroutines dial at once while others extend the script.
func TestConcurrentDials(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	c := fakes.NewConnector(s.addr, fakes.Refused().Times(50))
	const dialers, extenders = 100, 10
	ctx := testCtx(t)

	var wg sync.WaitGroup
	results := make(chan string, dialers)
	start := make(chan struct{})
	for range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results <- outcome(c.Dial(ctx, "tcp", ""))
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	counts := map[string]int{}
	for r := range results {
		counts[r]++
	}
	if counts["refused"] != 50 || counts["connect"] != 50 || len(counts) != 2 {
		t.Errorf("outcomes = %v, want exactly 50 refused and 50 connect", counts)
	}
	if c.Attempts() != dialers || c.Successes() != 50 || c.Failures() != 50 {
		t.Errorf("attempts/successes/failures = %d/%d/%d, want 100/50/50", c.Attempts(), c.Successes(), c.Failures())
	}

	// Then while dialing: whatever the interleaving, every appended step
	// plays exactly once.
	c.Set(status(403).Times(20))
	results = make(chan string, dialers+extenders)
	for range extenders {
		wg.Add(1)
		go func() { defer wg.Done(); c.Then(status(503)) }()
	}
	for range dialers {
		wg.Add(1)
		go func() { defer wg.Done(); results <- outcome(c.Dial(ctx, "tcp", "")) }()
	}
	wg.Wait()
	// Drain what remains of the script.
	for {
		r := outcome(c.Dial(ctx, "tcp", ""))
		results <- r
		if r == "connect" {
			break
		}
	}
	close(results)
	counts = map[string]int{}
	for r := range results {
		counts[r]++
	}
	if counts["status403"] != 20 || counts["status503"] != extenders || len(counts) != 3 {
		t.Errorf("outcomes = %v, want 20 status403, %d status503, the rest connect", counts, extenders)
	}
}

func TestStepString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		step fakes.Step
		want string
	}{
		{fakes.Step{}, "Connect()"},
		{fakes.Connect(), "Connect()"},
		{status(503), "status(503)"},
		{status(403).Times(2), "status(403).Times(2)"},
		{fakes.Custom("", nil, nil), `Custom("")`},
		{fakes.Refused().Times(3), "Refused().Times(3)"},
		{fakes.Reset(), "ResetAfter(0)"},
		{fakes.ResetAfter(-5), "ResetAfter(0)"},
		{fakes.ResetAfter(7).Forever(), "ResetAfter(7).Forever()"},
		{fakes.Fail(errors.New("boom")), `Fail("boom")`},
		{fakes.Fail(nil), "Fail(nil)"},
		{fakes.Hang().Times(-1), "Hang().Times(0)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.step.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

// GoString names this package for its own steps; a Custom step's name
// names its package already.
func TestStepGoString(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		step fakes.Step
		want string
	}{
		{fakes.Refused().Times(3), "fakes.Refused().Times(3)"},
		{fakes.Step{}, "fakes.Connect()"},
		{status(503).Forever(), "status(503).Forever()"},
	} {
		if got := fmt.Sprintf("%#v", tt.step); got != tt.want {
			t.Errorf("%%#v = %q, want %q", got, tt.want)
		}
	}
	// Steps stay comparable: a Custom step equals its copies only.
	s := status(503)
	copy1, copy2, other := s.Times(2), s.Times(2), status(503)
	refused1, refused2 := fakes.Refused(), fakes.Refused()
	if copy1 != copy2 || s == other || refused1 != refused2 {
		t.Error("Step equality changed")
	}
}
