package cloudsqltest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/cloudsqlconn/errtype"
	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast/fakes"
	fake "github.com/holdfast-db/holdfast/fakes/cloudsqltest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

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

// TestStepDialChains checks that each step's error has the exact chain of
// types the Cloud SQL connector (cloudsql.ConnectorVersion) returns for that
// failure.
func TestStepDialChains(t *testing.T) {
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
		{"TokenFetch503", fake.TokenFetch503(), tokenChain,
			`fetch ephemeral cert failed: refresh error: failed to retrieve Oauth2 token (connection name = "` + fake.ConnName + `"): auth: cannot fetch token: 503`,
			503, true},
		{"TokenFetch(400) invalid_grant", fake.TokenFetch(400), tokenChain, "fetch ephemeral cert failed: ", 400, false},
		{"TokenFetch(401)", fake.TokenFetch(401), tokenChain, "fetch ephemeral cert failed: ", 401, false},
		{"TokenFetch(429)", fake.TokenFetch(429), tokenChain, "fetch ephemeral cert failed: ", 429, true},
		{"AdminAPI(503)", fake.AdminAPI(503), apiChain,
			`failed to get instance: refresh error: failed to get instance metadata (connection name = "` + fake.ConnName + `"): googleapi: Error 503: The service is currently unavailable., backendError`,
			503, false},
		{"Forbidden is AdminAPI(403)", fake.Forbidden(), apiChain,
			`failed to get instance: refresh error: failed to get instance metadata (connection name = "` + fake.ConnName + `"): googleapi: Error 403: The client is not authorized to make this request., notAuthorized`,
			403, false},
		{"AdminAPI(404)", fake.AdminAPI(404), apiChain, "failed to get instance: ", 404, false},
		{"AdminAPI(500)", fake.AdminAPI(500), apiChain, "failed to get instance: ", 500, false},
		{"AdminAPI(418) unusual code", fake.AdminAPI(418), apiChain, "failed to get instance: ", 418, false},
		{"AdminAPI(0) nonsense code", fake.AdminAPI(0), apiChain, "failed to get instance: ", 0, false},
		{"AdminAPI(200) nonsense code", fake.AdminAPI(200), apiChain, "failed to get instance: ", 200, false},
		{"TokenFetch(0) nonsense code", fake.TokenFetch(0), tokenChain, "fetch ephemeral cert failed: ", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := fakes.NewConnector("127.0.0.1:1", tt.step.Times(2))
			conn, err := c.Dial(testCtx(t), "tcp", "192.0.2.1:5432") // TEST-NET-1: must never be dialed
			if conn != nil {
				t.Fatal("Dial returned a connection with an error")
			}
			if got := chain(err); !reflect.DeepEqual(got, tt.chain) {
				t.Fatalf("chain = %v, want %v", got, tt.chain)
			}
			if got := err.Error(); !strings.HasPrefix(got, tt.prefix) {
				t.Errorf("Error() = %q, want prefix %q", got, tt.prefix)
			}
			var re *errtype.RefreshError
			if !errors.As(err, &re) || re.ConnName != fake.ConnName {
				t.Errorf("RefreshError.ConnName: %v", err)
			}
			var ae *auth.Error
			var ge *googleapi.Error
			if errors.As(err, &ae) {
				if re.Message != "failed to retrieve Oauth2 token" {
					t.Errorf("RefreshError.Message = %q", re.Message)
				}
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
				if errors.As(err, &ge) {
					t.Errorf("a token fetch failure must not carry a *googleapi.Error")
				}
			}
			if errors.As(err, &ge) {
				if re.Message != "failed to get instance metadata" {
					t.Errorf("RefreshError.Message = %q", re.Message)
				}
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
			if c.Attempts() != 2 || c.Failures() != 2 {
				t.Errorf("attempts/failures = %d/%d, want 2/2", c.Attempts(), c.Failures())
			}
		})
	}
}

// In a PasswordSource the steps fail with the token source's or the API
// client's error alone, without the connector's wrapping.
func TestStepPasswordErrors(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-s3cret"
	tests := []struct {
		name  string
		step  fakes.Step
		check func(t *testing.T, err error)
	}{
		{"TokenFetch503 has the token-source shape", fake.TokenFetch503(), func(t *testing.T, err error) {
			want := []string{"*auth.Error", "*oauth2.RetrieveError"}
			if got := chain(err); !reflect.DeepEqual(got, want) {
				t.Fatalf("chain = %v, want %v", got, want)
			}
			var ae *auth.Error
			var oe *oauth2.RetrieveError
			if !errors.As(err, &ae) || !ae.Temporary() || !errors.As(err, &oe) || oe.Response.StatusCode != 503 {
				t.Errorf("err = %v, want a temporary 503", err)
			}
		}},
		{"TokenFetch(401) is not temporary", fake.TokenFetch(401), func(t *testing.T, err error) {
			var ae *auth.Error
			var oe *oauth2.RetrieveError
			if !errors.As(err, &ae) || ae.Temporary() || !errors.As(err, &oe) || oe.ErrorCode != "invalid_client" {
				t.Errorf("err = %v, want a permanent invalid_client", err)
			}
		}},
		{"AdminAPI is the googleapi error alone", fake.AdminAPI(503), func(t *testing.T, err error) {
			want := []string{"*googleapi.Error", "*apierror.APIError"}
			if got := chain(err); !reflect.DeepEqual(got, want) {
				t.Fatalf("chain = %v, want %v", got, want)
			}
			var ge *googleapi.Error
			if !errors.As(err, &ge) || ge.Code != 503 {
				t.Errorf("err = %v, want *googleapi.Error 503", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := fakes.NewPasswordSource(secret, tt.step)
			pw, err := p.Password(testCtx(t), "")
			if err == nil || pw != "" {
				t.Fatalf("Password = %q, %v; want an error and no password", pw, err)
			}
			for _, out := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
				if strings.Contains(out, secret) {
					t.Errorf("the error shows the password: %q", out)
				}
			}
			tt.check(t, err)
			if pw, err := p.Password(testCtx(t), ""); err != nil || pw != secret {
				t.Errorf("second Password = %q, %v; want the password", pw, err)
			}
		})
	}
}

func TestStepString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		step fakes.Step
		want string
	}{
		{fake.TokenFetch503(), "cloudsqltest.TokenFetch(503)"},
		{fake.TokenFetch(401).Times(2), "cloudsqltest.TokenFetch(401).Times(2)"},
		{fake.Forbidden(), "cloudsqltest.AdminAPI(403)"},
		{fake.AdminAPI(503).Forever(), "cloudsqltest.AdminAPI(503).Forever()"},
	}
	for _, tt := range tests {
		if got := tt.step.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
		if got := fmt.Sprintf("%#v", tt.step); got != tt.want {
			t.Errorf("%%#v = %q, want %q", got, tt.want)
		}
	}
}

// Concurrent plays each build their own error.
func TestStepConcurrentPlays(t *testing.T) {
	t.Parallel()
	c := fakes.NewConnector("127.0.0.1:1", fake.TokenFetch503().Forever())
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range errs {
		wg.Go(func() { _, errs[i] = c.Dial(ctx, "tcp", "") })
	}
	wg.Wait()
	seen := map[*errtype.RefreshError]bool{}
	for _, err := range errs {
		var re *errtype.RefreshError
		if !errors.As(err, &re) || seen[re] {
			t.Fatalf("err = %v: want a fresh *errtype.RefreshError per play", err)
		}
		seen[re] = true
	}
	if c.Attempts() != 50 || c.Failures() != 50 {
		t.Errorf("attempts/failures = %d/%d, want 50/50", c.Attempts(), c.Failures())
	}
}

// The Cloud SQL scenario through pgx: the first connect fails because the
// IAM token fetch got a 503, the second works.
func TestStepThroughPgx(t *testing.T) {
	t.Parallel()
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	// One dial per connect whatever the host resolves to.
	cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	target := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	c := fakes.NewConnector(target, fake.TokenFetch503(), fake.Forbidden(), fakes.Connect())
	cfg.DialFunc = c.Dial
	ctx := testCtx(t)

	_, err = pgx.ConnectConfig(ctx, cfg)
	var ce *pgconn.ConnectError
	var re *errtype.RefreshError
	var ae *auth.Error
	var oe *oauth2.RetrieveError
	if !errors.As(err, &ce) || !errors.As(err, &re) || !errors.As(err, &ae) || !errors.As(err, &oe) {
		t.Fatalf("err = %v; want *pgconn.ConnectError, *errtype.RefreshError, *auth.Error, *oauth2.RetrieveError in the chain", err)
	}
	if !ae.Temporary() || oe.Response.StatusCode != 503 || re.ConnName != fake.ConnName {
		t.Errorf("auth.Error.Temporary = %v, status %d, conn name %q", ae.Temporary(), oe.Response.StatusCode, re.ConnName)
	}

	_, err = pgx.ConnectConfig(ctx, cfg)
	var ge *googleapi.Error
	if !errors.As(err, &ce) || !errors.As(err, &ge) || ge.Code != 403 {
		t.Fatalf("err = %v; want *pgconn.ConnectError wrapping *googleapi.Error 403", err)
	}

	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("third connect: %v", err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	if c.Attempts() != 3 || c.Successes() != 1 || c.Failures() != 2 {
		t.Errorf("attempts/successes/failures = %d/%d/%d, want 3/1/2", c.Attempts(), c.Successes(), c.Failures())
	}
}

// The steps' errors are the shapes the connector and the fake Server
// produce: ConnName is the default Server's.
func TestConnNameIsTheDefaultServers(t *testing.T) {
	t.Parallel()
	s := newFake(t, fake.Config{Backend: "127.0.0.1:1"}) // never dialed
	if s.ConnName() != fake.ConnName {
		t.Errorf("Server.ConnName() = %q, ConnName = %q; want them equal", s.ConnName(), fake.ConnName)
	}
}
