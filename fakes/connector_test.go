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
	"sync"
	"syscall"
	"testing"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/cloudsqlconn/errtype"
	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
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
			name:    "TokenFetch503",
			step:    fakes.TokenFetch503(),
			wantErr: true,
			check: func(t *testing.T, s *server, conn net.Conn, err error) {
				var re *errtype.RefreshError
				var ae *auth.Error
				var oe *oauth2.RetrieveError
				if !errors.As(err, &re) || !errors.As(err, &ae) || !errors.As(err, &oe) {
					t.Fatalf("err %v: want *errtype.RefreshError, *auth.Error and *oauth2.RetrieveError in the chain", err)
				}
				if re.ConnName != fakes.ConnName || re.Message != "failed to retrieve Oauth2 token" {
					t.Errorf("RefreshError = %q %q", re.Message, re.ConnName)
				}
				if !ae.Temporary() || ae.Response.StatusCode != 503 || oe.Response.StatusCode != 503 {
					t.Errorf("auth.Error temporary=%v status=%d, RetrieveError status=%d; want true, 503, 503",
						ae.Temporary(), ae.Response.StatusCode, oe.Response.StatusCode)
				}
				var ge *googleapi.Error
				if errors.As(err, &ge) {
					t.Errorf("a token fetch failure must not carry a *googleapi.Error")
				}
			},
		},
		{
			name:    "Forbidden is AdminAPI(403)",
			step:    fakes.Forbidden(),
			wantErr: true,
			check: func(t *testing.T, s *server, conn net.Conn, err error) {
				var ge *googleapi.Error
				if !errors.As(err, &ge) || ge.Code != 403 {
					t.Fatalf("err %v: want *googleapi.Error with Code 403", err)
				}
				var re *errtype.RefreshError
				if !errors.As(err, &re) || re.Message != "failed to get instance metadata" {
					t.Errorf("err %v: want *errtype.RefreshError(failed to get instance metadata)", err)
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

// TestCloudSQLChains checks the exact chains of cloudsql.md §1.3.
func TestCloudSQLChains(t *testing.T) {
	t.Parallel()
	tokenChain := []string{"*fmt.wrapError", "*errtype.RefreshError", "*auth.Error", "*oauth2.RetrieveError"}
	apiChain := []string{"*fmt.wrapError", "*errtype.RefreshError", "*googleapi.Error", "*apierror.APIError"}
	tests := []struct {
		name      string
		step      fakes.Step
		chain     []string
		prefix    string
		code      int
		temporary bool // auth.Error.Temporary for token steps
	}{
		{"TokenFetch503", fakes.TokenFetch503(), tokenChain,
			`fetch ephemeral cert failed: refresh error: failed to retrieve Oauth2 token (connection name = "` + fakes.ConnName + `"): auth: cannot fetch token: 503`,
			503, true},
		{"TokenFetch(400) invalid_grant", fakes.TokenFetch(400), tokenChain, "fetch ephemeral cert failed: ", 400, false},
		{"TokenFetch(401)", fakes.TokenFetch(401), tokenChain, "fetch ephemeral cert failed: ", 401, false},
		{"TokenFetch(429)", fakes.TokenFetch(429), tokenChain, "fetch ephemeral cert failed: ", 429, true},
		{"AdminAPI(503)", fakes.AdminAPI(503), apiChain,
			`failed to get instance: refresh error: failed to get instance metadata (connection name = "` + fakes.ConnName + `"): googleapi: Error 503: The service is currently unavailable., backendError`,
			503, false},
		{"AdminAPI(403)", fakes.AdminAPI(403), apiChain,
			`failed to get instance: refresh error: failed to get instance metadata (connection name = "` + fakes.ConnName + `"): googleapi: Error 403: The client is not authorized to make this request., notAuthorized`,
			403, false},
		{"AdminAPI(404)", fakes.AdminAPI(404), apiChain, "failed to get instance: ", 404, false},
		{"AdminAPI(500)", fakes.AdminAPI(500), apiChain, "failed to get instance: ", 500, false},
		{"AdminAPI(418) unusual code", fakes.AdminAPI(418), apiChain, "failed to get instance: ", 418, false},
		{"AdminAPI(0) nonsense code", fakes.AdminAPI(0), apiChain, "failed to get instance: ", 0, false},
		{"AdminAPI(200) nonsense code", fakes.AdminAPI(200), apiChain, "failed to get instance: ", 200, false},
		{"TokenFetch(0) nonsense code", fakes.TokenFetch(0), tokenChain, "fetch ephemeral cert failed: ", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := fakes.NewConnector("127.0.0.1:1", tt.step.Times(2))
			_, err := c.Dial(testCtx(t), "tcp", "")
			if got := chain(err); !reflect.DeepEqual(got, tt.chain) {
				t.Fatalf("chain = %v, want %v", got, tt.chain)
			}
			if got := err.Error(); len(got) < len(tt.prefix) || got[:len(tt.prefix)] != tt.prefix {
				t.Errorf("Error() = %q, want prefix %q", got, tt.prefix)
			}
			var re *errtype.RefreshError
			if !errors.As(err, &re) || re.ConnName != fakes.ConnName {
				t.Errorf("RefreshError.ConnName: %v", err)
			}
			var ae *auth.Error
			if errors.As(err, &ae) {
				if ae.Response == nil || ae.Response.StatusCode != tt.code || ae.Temporary() != tt.temporary {
					t.Errorf("auth.Error: Response %v, Temporary %v; want status %d, temporary %v",
						ae.Response, ae.Temporary(), tt.code, tt.temporary)
				}
				var oe *oauth2.RetrieveError
				if !errors.As(err, &oe) || oe.Response.StatusCode != tt.code || !bytes.Equal(oe.Body, ae.Body) {
					t.Errorf("RetrieveError: %v", oe)
				}
				if tt.code == 400 && oe.ErrorCode != "invalid_grant" {
					t.Errorf("RetrieveError.ErrorCode = %q, want invalid_grant", oe.ErrorCode)
				}
			}
			var ge *googleapi.Error
			if errors.As(err, &ge) {
				var apiErr *apierror.APIError
				if ge.Code != tt.code || !errors.As(err, &apiErr) || apiErr.HTTPCode() != tt.code {
					t.Errorf("googleapi.Error.Code = %d, APIError %v; want %d", ge.Code, apiErr, tt.code)
				}
				if len(ge.Body) == 0 || ge.Body[0] != '{' {
					t.Errorf("googleapi.Error.Body = %q, want the JSON body", ge.Body)
				}
			}
			// Each play builds fresh values: a caller mutating one error
			// cannot affect the next.
			_, err2 := c.Dial(testCtx(t), "tcp", "")
			var re2 *errtype.RefreshError
			if !errors.As(err2, &re2) || re2 == re || re2.Err == re.Err {
				t.Errorf("the second play returned the same error values")
			}
			if err2.Error() != err.Error() {
				t.Errorf("second play: %q, first %q", err2, err)
			}
		})
	}
}

// outcome names the result of one dial for the script tests.
func outcome(conn net.Conn, err error) string {
	var ge *googleapi.Error
	var ae *auth.Error
	switch {
	case err == nil:
		conn.Close()
		return "connect"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.As(err, &ae):
		return fmt.Sprintf("token%d", ae.Response.StatusCode)
	case errors.As(err, &ge):
		return fmt.Sprintf("api%d", ge.Code)
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
			[]fakes.Step{fakes.Refused(), fakes.Connect(), fakes.TokenFetch503(), fakes.Fail(errSentinel)},
			[]string{"refused", "connect", "token503", "fail", "connect", "connect"}},
		{"Times", []fakes.Step{fakes.Refused().Times(3), fakes.Forbidden()},
			[]string{"refused", "refused", "refused", "api403", "connect"}},
		{"Times(0) and negative skip the step",
			[]fakes.Step{fakes.Refused().Times(0), fakes.Forbidden().Times(-1), fakes.AdminAPI(503)},
			[]string{"api503", "connect"}},
		{"Forever", []fakes.Step{fakes.Connect(), fakes.AdminAPI(404).Forever()},
			[]string{"connect", "api404", "api404", "api404", "api404"}},
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
	steps[0] = fakes.Forbidden() // the Connector keeps its own copy
	dial := func() string { return outcome(c.Dial(testCtx(t), "tcp", "")) }

	if got := dial(); got != "refused" {
		t.Fatalf("dial 1 = %s, want refused", got)
	}
	c.Then(fakes.TokenFetch503())
	var got []string
	for range 3 {
		got = append(got, dial())
	}
	if want := []string{"refused", "token503", "connect"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after Then: %v, want %v", got, want)
	}

	c.Set(fakes.Refused().Forever())
	c.Then(fakes.Connect()) // after a Forever: never plays
	if got := dial(); got != "refused" {
		t.Errorf("after Set(Forever): %s, want refused", got)
	}
	c.Set(fakes.AdminAPI(503), fakes.Forbidden())
	if got := dial(); got != "api503" {
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
	c.Set(fakes.Forbidden().Times(20))
	results = make(chan string, dialers+extenders)
	for range extenders {
		wg.Add(1)
		go func() { defer wg.Done(); c.Then(fakes.AdminAPI(503)) }()
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
	if counts["api403"] != 20 || counts["api503"] != extenders || len(counts) != 3 {
		t.Errorf("outcomes = %v, want 20 api403, %d api503, the rest connect", counts, extenders)
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
		{fakes.TokenFetch503(), "TokenFetch(503)"},
		{fakes.Forbidden(), "AdminAPI(403)"},
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
