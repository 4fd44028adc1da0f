package rdsiam_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/rdsiam"
)

const (
	akid   = "AKIDHOLDFASTTEST"
	secret = "holdfast-test-secret-key"
)

// parseToken splits an RDS IAM token ("host:port?Action=connect&...") into
// its endpoint and query.
func parseToken(t *testing.T, tok string) (string, url.Values) {
	t.Helper()
	if strings.HasPrefix(tok, "http") {
		t.Fatalf("token %q keeps its URL scheme", tok)
	}
	u, err := url.Parse("https://" + tok)
	if err != nil {
		t.Fatalf("token is not a URL without scheme: %v", err)
	}
	if u.Path != "" || u.User != nil || u.Fragment != "" {
		t.Errorf("token %q has more than host:port?query", tok)
	}
	return u.Host, u.Query()
}

func TestTokenShape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		endpoint string
		region   string
		user     string
		session  string
	}{
		{"instance endpoint", "mydb.abc123.eu-west-1.rds.amazonaws.com:5432", "eu-west-1", "app_user", ""},
		{"proxy endpoint, other port, session credentials", "proxy.proxy-abc.us-east-2.rds.amazonaws.com:6432", "us-east-2", "svc", "session-token"},
		{"user needing escaping", "db.example:5432", "ap-south-1", "user@corp+x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			creds := credentials.NewStaticCredentialsProvider(akid, secret, tt.session)
			pw, err := rdsiam.PasswordFunc(rdsiam.Config{Endpoint: tt.endpoint, Region: tt.region, User: tt.user, Credentials: creds})
			if err != nil {
				t.Fatal(err)
			}
			before := time.Now().UTC().Truncate(time.Second)
			tok, err := pw(context.Background())
			after := time.Now().UTC()
			if err != nil {
				t.Fatal(err)
			}
			host, q := parseToken(t, tok)
			if host != tt.endpoint {
				t.Errorf("host:port = %q, want %q", host, tt.endpoint)
			}
			if q.Get("Action") != "connect" || q.Get("DBUser") != tt.user {
				t.Errorf("Action = %q, DBUser = %q; want connect, %q", q.Get("Action"), q.Get("DBUser"), tt.user)
			}
			if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" || q.Get("X-Amz-SignedHeaders") != "host" {
				t.Errorf("algorithm %q, signed headers %q", q.Get("X-Amz-Algorithm"), q.Get("X-Amz-SignedHeaders"))
			}
			signed, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
			if err != nil || signed.Before(before) || signed.After(after) {
				t.Errorf("X-Amz-Date = %q, want between %v and %v", q.Get("X-Amz-Date"), before, after)
			}
			cred := strings.Split(q.Get("X-Amz-Credential"), "/")
			if len(cred) != 5 || cred[0] != akid || cred[1] != signed.Format("20060102") || cred[2] != tt.region || cred[3] != "rds-db" || cred[4] != "aws4_request" {
				t.Errorf("X-Amz-Credential = %q, want %s/<date>/%s/rds-db/aws4_request", q.Get("X-Amz-Credential"), akid, tt.region)
			}
			if q.Get("X-Amz-Expires") != "900" {
				t.Errorf("X-Amz-Expires = %q, want 900", q.Get("X-Amz-Expires"))
			}
			if exp := signed.Add(rdsiam.TokenLifetime); exp.Sub(after) < 14*time.Minute || exp.Sub(before) > 15*time.Minute {
				t.Errorf("token expires at %v, want 15 minutes after %v", exp, signed)
			}
			if q.Get("X-Amz-Security-Token") != tt.session {
				t.Errorf("X-Amz-Security-Token = %q, want %q", q.Get("X-Amz-Security-Token"), tt.session)
			}
			if strings.Contains(tok, secret) {
				t.Error("the token contains the secret access key")
			}
			// The signature is what RDS checks: sign the same request at
			// the same time and compare.
			if want := resign(t, tt.endpoint, tt.region, tt.user, creds, signed); q.Get("X-Amz-Signature") != want {
				t.Errorf("X-Amz-Signature = %q, want %q", q.Get("X-Amz-Signature"), want)
			}
		})
	}
}

// resign presigns the RDS connect request independently and returns its
// signature.
func resign(t *testing.T, endpoint, region, user string, creds aws.CredentialsProvider, at time.Time) string {
	t.Helper()
	q := url.Values{"Action": {"connect"}, "DBUser": {user}, "X-Amz-Expires": {"900"}}
	req, err := http.NewRequest(http.MethodGet, "https://"+endpoint+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := creds.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), c, req,
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "rds-db", region, at)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(signed)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("X-Amz-Signature")
}

func TestTokenChangesWithCredentialsAndTime(t *testing.T) {
	t.Parallel()
	cfg := rdsiam.Config{Endpoint: "db:5432", Region: "eu-west-1", User: "u", Credentials: credentials.NewStaticCredentialsProvider(akid, secret, "")}
	pw1, _ := rdsiam.PasswordFunc(cfg)
	cfg.Credentials = credentials.NewStaticCredentialsProvider(akid, "another-secret", "")
	pw2, _ := rdsiam.PasswordFunc(cfg)
	a, err1 := pw1(context.Background())
	b, err2 := pw2(context.Background())
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	_, qa := parseToken(t, a)
	_, qb := parseToken(t, b)
	if qa.Get("X-Amz-Date") == qb.Get("X-Amz-Date") && qa.Get("X-Amz-Signature") == qb.Get("X-Amz-Signature") {
		t.Error("two different secrets signed the same token")
	}
}

func TestPasswordFuncIsConcurrencySafe(t *testing.T) {
	t.Parallel()
	pw, err := rdsiam.PasswordFunc(rdsiam.Config{Endpoint: "db:5432", Region: "eu-west-1", User: "u",
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(akid, secret, ""))})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tok, err := pw(context.Background()); err != nil || !strings.HasPrefix(tok, "db:5432?Action=connect&") {
				errs <- fmt.Errorf("token %q, err %v", tok, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestPasswordFuncConfigErrors(t *testing.T) {
	t.Parallel()
	creds := credentials.NewStaticCredentialsProvider(akid, secret, "")
	ok := rdsiam.Config{Endpoint: "db.example:5432", Region: "eu-west-1", User: "u", Credentials: creds}
	tests := []struct {
		name  string
		edit  func(c *rdsiam.Config)
		field string
	}{
		{"no endpoint", func(c *rdsiam.Config) { c.Endpoint = "" }, "Endpoint"},
		{"endpoint without port", func(c *rdsiam.Config) { c.Endpoint = "db.example" }, "Endpoint"},
		{"endpoint with a named port", func(c *rdsiam.Config) { c.Endpoint = "db.example:postgres" }, "Endpoint"},
		{"endpoint with port 0", func(c *rdsiam.Config) { c.Endpoint = "db.example:0" }, "Endpoint"},
		{"endpoint without host", func(c *rdsiam.Config) { c.Endpoint = ":5432" }, "Endpoint"},
		{"no region", func(c *rdsiam.Config) { c.Region = "" }, "Region"},
		{"no user", func(c *rdsiam.Config) { c.User = "" }, "User"},
		{"no credentials", func(c *rdsiam.Config) { c.Credentials = nil }, "Credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := ok
			tt.edit(&c)
			fn, err := rdsiam.PasswordFunc(c)
			var ce *rdsiam.ConfigError
			if fn != nil || !errors.As(err, &ce) || ce.Field != tt.field || !errors.Is(err, rdsiam.ErrInvalidConfig) {
				t.Fatalf("PasswordFunc = %v; want a *ConfigError for %s", err, tt.field)
			}
			if !strings.HasPrefix(err.Error(), "rdsiam: invalid "+tt.field) {
				t.Errorf("message %q", err)
			}
		})
	}
	t.Run("IPv6 endpoint is fine", func(t *testing.T) {
		c := ok
		c.Endpoint = "[2001:db8::1]:5432"
		if _, err := rdsiam.PasswordFunc(c); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTokenErrorWrapsTheCredentialsFailure(t *testing.T) {
	t.Parallel()
	boom := errors.New("no EC2 IMDS role found")
	pw, err := rdsiam.PasswordFunc(rdsiam.Config{Endpoint: "db:5432", Region: "eu-west-1", User: "app",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return aws.Credentials{}, boom })})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := pw(context.Background())
	var te *rdsiam.TokenError
	if tok != "" || !errors.As(err, &te) || !errors.Is(err, boom) || !errors.Is(err, rdsiam.ErrToken) {
		t.Fatalf("pw() = %q, %v; want a *TokenError wrapping the provider's error", tok, err)
	}
	if te.User != "app" || te.Endpoint != "db:5432" || te.Region != "eu-west-1" {
		t.Errorf("TokenError = %+v", te)
	}
	if !strings.HasPrefix(err.Error(), `rdsiam: cannot mint an auth token for user "app" at db:5432 (eu-west-1): `) {
		t.Errorf("message %q", err)
	}
	// An unknown provider failure is left to the built-in rules: Fatal.
	if v := classify.New(rdsiam.Rules()...).Classify(err); v.Class != classify.Fatal {
		t.Errorf("verdict = %v, want fatal", v)
	}
}

func TestConfigFor(t *testing.T) {
	t.Parallel()
	creds := credentials.NewStaticCredentialsProvider(akid, secret, "")
	parse := func(dsn string) *pgxpool.Config {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	c, err := rdsiam.ConfigFor(parse("postgres://app@mydb.abc.eu-west-1.rds.amazonaws.com:5433/db?sslmode=verify-full&sslrootcert=system"), "eu-west-1", creds)
	if err != nil {
		t.Fatal(err)
	}
	if c.Endpoint != "mydb.abc.eu-west-1.rds.amazonaws.com:5433" || c.User != "app" || c.Region != "eu-west-1" || c.Credentials == nil {
		t.Errorf("ConfigFor = %+v", c)
	}
	// sslmode=prefer adds a same-host fallback; that is one endpoint.
	if _, err := rdsiam.ConfigFor(parse("host=db.example user=app sslmode=prefer"), "eu-west-1", creds); err != nil {
		t.Errorf("sslmode=prefer: %v", err)
	}
	for _, tt := range []struct {
		name   string
		cfg    *pgxpool.Config
		region string
	}{
		{"nil config", nil, "eu-west-1"},
		{"several hosts", parse("host=a.example,b.example user=app"), "eu-west-1"},
		{"unix socket", parse("host=/var/run/postgresql user=app"), "eu-west-1"},
		{"no region", parse("host=db.example user=app"), ""},
	} {
		if _, err := rdsiam.ConfigFor(tt.cfg, tt.region, creds); !errors.Is(err, rdsiam.ErrInvalidConfig) {
			t.Errorf("%s: ConfigFor = %v, want ErrInvalidConfig", tt.name, err)
		}
	}
}

// statusErr has the HTTPStatusCode method of AWS SDK errors.
type statusErr int

func (e statusErr) Error() string       { return fmt.Sprintf("status %d", int(e)) }
func (e statusErr) HTTPStatusCode() int { return int(e) }

func TestRules(t *testing.T) {
	t.Parallel()
	tokenErr := func(err error) error {
		return fmt.Errorf("holdfast: password: %w", &rdsiam.TokenError{Endpoint: "db:5432", Region: "r", User: "u", Err: fmt.Errorf("failed to refresh cached credentials, %w", err)})
	}
	tests := []struct {
		name string
		err  error
		want classify.Verdict
	}{
		{"503", tokenErr(statusErr(503)), classify.Verdict{Class: classify.Transient, Reason: "aws-credentials-503"}},
		{"500", tokenErr(statusErr(500)), classify.Verdict{Class: classify.Transient, Reason: "aws-credentials-500"}},
		{"429", tokenErr(statusErr(429)), classify.Verdict{Class: classify.Transient, Reason: "aws-credentials-429"}},
		{"408", tokenErr(statusErr(408)), classify.Verdict{Class: classify.Transient, Reason: "aws-credentials-408"}},
		{"403", tokenErr(statusErr(403)), classify.Verdict{Class: classify.Fatal, Reason: rdsiam.ReasonCredentialsDenied}},
		{"401", tokenErr(statusErr(401)), classify.Verdict{Class: classify.Fatal, Reason: rdsiam.ReasonCredentialsDenied}},
		{"404", tokenErr(statusErr(404)), classify.Verdict{Class: classify.Fatal, Reason: "aws-credentials-404"}},
		{"no status: built-in rules (timeout)", tokenErr(context.DeadlineExceeded), classify.Verdict{Class: classify.Transient, Reason: classify.ReasonTimeout}},
		{"no status: built-in rules (unknown)", tokenErr(errors.New("x")), classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonUnknown}},
		{"a status outside a TokenError is not ours", statusErr(503), classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonUnknown}},
	}
	c := classify.New(rdsiam.Rules()...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := c.Classify(tt.err); got != tt.want {
				t.Errorf("Classify = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWith: the option installs the token function and the rules, reports a
// bad Config as a *holdfast.ConfigError wrapping this package's, and
// refuses a second password function.
func TestWith(t *testing.T) {
	creds := credentials.NewStaticCredentialsProvider(akid, secret, "")
	good := rdsiam.Config{Endpoint: "db:5432", Region: "eu-west-1", User: "u", Credentials: creds}
	if _, err := holdfast.New(rdsiam.With(good)); err != nil {
		t.Fatalf("New(With(good)) = %v", err)
	}
	_, err := holdfast.New(rdsiam.With(rdsiam.Config{Endpoint: "db:5432"}))
	var hce *holdfast.ConfigError
	var rce *rdsiam.ConfigError
	if !errors.As(err, &hce) || !errors.As(hce.Err, &rce) || rce.Pkg != "rdsiam" || rce.Field != "Region" {
		t.Errorf("New(With(no region)) = %v, want a *holdfast.ConfigError wrapping *rdsiam.ConfigError{Field: Region}", err)
	}
	pw := func(context.Context, string) (string, error) { return "x", nil }
	if _, err := holdfast.New(rdsiam.With(good), holdfast.WithPasswordFunc(pw)); !errors.As(err, &hce) {
		t.Errorf("New(With, WithPasswordFunc) = %v, want a *holdfast.ConfigError", err)
	}
}

// TestHostPasswordFunc: the token is signed for the host it is told, with
// the port of Endpoint, when that host is an RDS endpoint of Endpoint's
// account and Region (a blue/green counterpart, an instance); for
// Endpoint when the host is Endpoint's own, "" or one of Config.Aliases;
// and not at all for any other host — a host a database row named, another
// account's, another Region's — which gets a typed, Fatal *HostError, and
// no credentials are retrieved for it.
//
// Before the fix, HostPasswordFunc signed a token for Endpoint when told a
// foreign host ("mydb-2.attacker.example", "db.example.com", an IP),
// which that host could replay for 15 minutes, and a token for another
// account's endpoint: checked on main, where the foreign cases below get a
// token and no error (TestNoTokenForForeignHost plays it end to end).
func TestHostPasswordFunc(t *testing.T) {
	t.Parallel()
	const (
		blue  = "orders.cluster-abc.us-east-1.rds.amazonaws.com"
		green = "orders-green-xyz123.cluster-abc.us-east-1.rds.amazonaws.com"
	)
	creds := &countingCreds{p: credentials.NewStaticCredentialsProvider(akid, secret, "")}
	cfg := rdsiam.Config{Endpoint: blue + ":5432", Region: "us-east-1", User: "app", Credentials: creds,
		Aliases: []string{"db.example.com", "10.0.0.7"}}
	pw, err := rdsiam.HostPasswordFunc(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ host, want string }{
		{blue, blue + ":5432"},
		{green, green + ":5432"},
		{strings.ToUpper(green), strings.ToUpper(green) + ":5432"},
		{"orders-2.abc.us-east-1.rds.amazonaws.com", "orders-2.abc.us-east-1.rds.amazonaws.com:5432"}, // an instance
		{"orders-old1.cluster-ro-abc.us-east-1.rds.amazonaws.com", "orders-old1.cluster-ro-abc.us-east-1.rds.amazonaws.com:5432"},
		{"", blue + ":5432"},
		{"db.example.com", blue + ":5432"}, // a DNS name of the user's own, configured
		{"DB.Example.com.", blue + ":5432"},
		{"10.0.0.7", blue + ":5432"},
	}
	for _, tt := range tests {
		tok, err := pw(context.Background(), tt.host)
		if err != nil {
			t.Fatalf("host %q: %v", tt.host, err)
		}
		if got, _ := parseToken(t, tok); got != tt.want {
			t.Errorf("host %q: token for %q, want %q", tt.host, got, tt.want)
		}
	}
	before := creds.n.Load()
	for _, host := range []string{
		"mydb-2.attacker.example", // a topology row's
		"orders-green-xyz123.cluster-abc.us-east-1.rds.amazonaws.com.attacker.example",
		"orders.cluster-zzz.us-east-1.rds.amazonaws.com",    // another account
		"orders.cluster-abc.eu-west-1.rds.amazonaws.com",    // another region
		"orders.cluster-abc.us-east-1.rds.attacker.example", // RDS-shaped, another domain
		"10.0.0.8",
		"db.example.org",
	} {
		tok, err := pw(context.Background(), host)
		var he *rdsiam.HostError
		if tok != "" || !errors.As(err, &he) || !errors.Is(err, rdsiam.ErrForeignHost) || he.Host != host {
			t.Errorf("host %q: token %q, error %v; want no token and a *HostError naming it", host, tok, err)
			continue
		}
		if v := classify.New(rdsiam.Rules()...).Classify(err); v.Class != classify.Fatal || v.Reason != rdsiam.ReasonForeignHost {
			t.Errorf("host %q: classified %+v, want Fatal %q", host, v, rdsiam.ReasonForeignHost)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), akid) {
			t.Errorf("host %q: error %q carries a credential", host, err)
		}
	}
	if n := creds.n.Load() - before; n != 0 {
		t.Errorf("credentials retrieved %d times for foreign hosts, want 0", n)
	}
	// Without aliases, a name of the user's own is refused too.
	noAlias := cfg
	noAlias.Aliases = nil
	pw2, err := rdsiam.HostPasswordFunc(noAlias)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pw2(context.Background(), "db.example.com"); !errors.Is(err, rdsiam.ErrForeignHost) {
		t.Errorf("db.example.com without Aliases: %v, want ErrForeignHost", err)
	}
	// An endpoint that is not RDS-shaped signs for itself and its aliases only.
	custom := cfg
	custom.Endpoint, custom.Aliases = "db.example.com:5432", nil
	pw3, err := rdsiam.HostPasswordFunc(custom)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := pw3(context.Background(), "db.example.com"); err != nil || !strings.HasPrefix(tok, "db.example.com:5432?") {
		t.Errorf("the endpoint's own host: %q, %v", tok, err)
	}
	if _, err := pw3(context.Background(), green); !errors.Is(err, rdsiam.ErrForeignHost) {
		t.Errorf("an RDS host under a custom endpoint: %v, want ErrForeignHost", err)
	}
	if _, err := rdsiam.HostPasswordFunc(rdsiam.Config{Endpoint: blue}); !errors.Is(err, rdsiam.ErrInvalidConfig) {
		t.Errorf("HostPasswordFunc without a port: %v, want a ConfigError", err)
	}
}

// countingCreds counts the credential retrievals of a provider.
type countingCreds struct {
	p aws.CredentialsProvider
	n atomic.Int64
}

func (c *countingCreds) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c.n.Add(1)
	return c.p.Retrieve(ctx)
}
