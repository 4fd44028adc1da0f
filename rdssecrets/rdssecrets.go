package rdssecrets

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
)

// Defaults of [Config].
const (
	// DefaultTTL is how long the AWSCURRENT credentials are reused: the
	// AWS wrappers' default (secretsManagerExpirationSec, 870 s).
	DefaultTTL = 870 * time.Second
	// DefaultPendingTTL is how long AWSPENDING credentials, used because
	// the AWSCURRENT ones were refused during a rotation, are reused
	// before the secret is read again.
	DefaultPendingTTL = 5 * time.Second
	// DefaultRotationWait bounds the re-poll of one call while the
	// refused AWSCURRENT credentials have no AWSPENDING successor yet.
	// It is below the default AttemptTimeout (3 s), which bounds the call.
	DefaultRotationWait = 2 * time.Second
	// DefaultPollInterval is the interval of that re-poll.
	DefaultPollInterval = 250 * time.Millisecond
)

// The version stages this package reads.
const (
	StageCurrent = "AWSCURRENT"
	StagePending = "AWSPENDING"
)

// GetSecretValueAPI is the method of *secretsmanager.Client this package
// calls.
type GetSecretValueAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Config says which secret to read. Client and SecretID are required.
type Config struct {
	// Client reads the secret: a *secretsmanager.Client.
	Client GetSecretValueAPI
	// SecretID is the secret's name or ARN.
	SecretID string
	// TTL is how long the AWSCURRENT credentials are reused for new
	// connections. Default DefaultTTL; negative: not reused.
	TTL time.Duration
	// PendingTTL is TTL for AWSPENDING credentials. Default
	// DefaultPendingTTL.
	PendingTTL time.Duration
	// RotationWait and PollInterval bound the re-poll of a call forced
	// by a refusal when no new version is there yet. Defaults
	// DefaultRotationWait and DefaultPollInterval; a negative
	// RotationWait: no re-poll.
	RotationWait, PollInterval time.Duration
}

// ErrInvalidConfig is [holdfast.ErrInvalidConfig], matched by every
// *ConfigError.
var ErrInvalidConfig = holdfast.ErrInvalidConfig

// ConfigError is [holdfast.ConfigError], the one configuration error of
// every holdfast package, under this package's name: its errors read
// "rdssecrets: invalid <Field>: <Why>" (Pkg "rdssecrets"), and one
// errors.As with either name finds them and any other package's. It is
// not retryable: fix the configuration.
type ConfigError = holdfast.ConfigError

// Secret is a secret in the RDS JSON shape. Only Username and Password are
// required; holdfast takes the host, port and database from the pool
// config, and Host, Port and DBName are there for building it.
type Secret struct {
	Username string
	Password string
	Host     string
	Port     int
	DBName   string
	Engine   string

	// VersionID and VersionStages are the version's, from the response.
	VersionID     string
	VersionStages []string
}

// String hides the password.
func (s Secret) String() string {
	return fmt.Sprintf("rdssecrets.Secret{Username: %q, Password: [REDACTED], Host: %q, Port: %d, DBName: %q, VersionID: %q}",
		s.Username, s.Host, s.Port, s.DBName, s.VersionID)
}

// GoString is String.
func (s Secret) GoString() string { return s.String() }

// Errors matched by [SecretError] (errors.Is).
var (
	// ErrSecret is matched by every *SecretError.
	ErrSecret = errors.New("rdssecrets: cannot read the secret")
	// ErrNotFound: the secret (or the version stage) does not exist:
	// ResourceNotFoundException, a deleted secret.
	ErrNotFound = errors.New("rdssecrets: secret not found")
	// ErrAccessDenied: AccessDeniedException.
	ErrAccessDenied = errors.New("rdssecrets: access to the secret denied")
	// ErrFormat: the secret string is not RDS JSON with a username and a
	// password.
	ErrFormat = errors.New("rdssecrets: the secret is not in the RDS JSON shape")
)

// SecretError reports that the secret could not be read or parsed. Err is
// the SDK's error (a *smithy.OperationError wrapping the API error) or a
// format error; the message names the secret and the stage, never a
// secret value. Whether it is worth retrying is decided by [Rules]:
//
//	| Failure                                      | Seen as                                          | holdfast               |
//	|----------------------------------------------|--------------------------------------------------|------------------------|
//	| ThrottlingException (400), 429               | *SecretError, Transient secretsmanager-throttled | fetch retried (policy) |
//	| InternalServiceError (500), any 5xx          | *SecretError, Transient secretsmanager-NNN       | fetch retried          |
//	| endpoint refused or timed out                | *SecretError → network error, Transient          | fetch retried          |
//	| ResourceNotFoundException (a deleted secret) | *SecretError, Fatal secretsmanager-not-found     | fails at once (1 call) |
//	| AccessDeniedException                        | *SecretError, Fatal secretsmanager-access-denied | fails at once          |
//	| DecryptionFailure (KMS)                      | *SecretError, Fatal secretsmanager-decryption    | fails at once          |
//	| not RDS JSON, no username or password        | *SecretError, Fatal secretsmanager-format        | fails at once          |
//
// errors.Is(err, ErrNotFound), ErrAccessDenied and ErrFormat match the
// *SecretError of each. A throttled fetch is retried under the factory's
// policy: with the test's policy, two throttles then an answer connect
// after 3 calls; throttling that does not stop gives up after 3 calls, in
// about 20 ms. The SDK client retries throttling and 5xx by itself too
// (3 attempts with its standard retryer), inside each of holdfast's
// attempts, each bounded by AttemptTimeout: give the client
// aws.NopRetryer{} (or retry.AddWithMaxAttempts(.., 1)) to leave the
// retries, and their budget, to holdfast.
type SecretError struct {
	SecretID string
	Stage    string
	Code     string // the API error code, e.g. "ThrottlingException"; "" if none
	Status   int    // the HTTP status; 0 if none
	Err      error
}

func (e *SecretError) Error() string {
	return fmt.Sprintf("rdssecrets: cannot read %s of secret %q: %v", e.Stage, e.SecretID, e.Err)
}

// Unwrap returns the cause.
func (e *SecretError) Unwrap() error { return e.Err }

// Is matches ErrSecret, and ErrNotFound, ErrAccessDenied or ErrFormat by
// the cause.
func (e *SecretError) Is(target error) bool {
	switch target {
	case ErrSecret:
		return true
	case ErrNotFound:
		return e.Code == "ResourceNotFoundException"
	case ErrAccessDenied:
		return e.Code == "AccessDeniedException"
	case ErrFormat:
		return errors.Is(e.Err, errFormat)
	}
	return false
}

var errFormat = errors.New("not RDS JSON")

// ErrRotation is matched by every *RotationError.
var ErrRotation = errors.New("rdssecrets: credentials refused")

// RotationError reports that the database refused the secret's AWSCURRENT
// credentials and that no other version came within the re-poll.
// Pending says whether an AWSPENDING version exists (a rotation is under
// way, whose finishSecret has not run yet; it is Transient then) or not
// (the secret does not match the database: Fatal).
type RotationError struct {
	SecretID  string
	VersionID string // of AWSCURRENT
	User      string
	Pending   bool
}

func (e *RotationError) Error() string {
	if e.Pending {
		return fmt.Sprintf("rdssecrets: the database refused user %q of secret %q (AWSCURRENT %s) and its AWSPENDING version too; the rotation has not finished", e.User, e.SecretID, e.VersionID)
	}
	return fmt.Sprintf("rdssecrets: the database refused user %q of secret %q (AWSCURRENT %s) and no rotation is pending: the secret does not match the database", e.User, e.SecretID, e.VersionID)
}

// Is matches ErrRotation.
func (e *RotationError) Is(target error) bool { return target == ErrRotation }

// Get reads the version of the secret that has stage (AWSCURRENT when
// empty) and parses it. It returns a *SecretError on failure.
func Get(ctx context.Context, client GetSecretValueAPI, secretID, stage string) (Secret, error) {
	if stage == "" {
		stage = StageCurrent
	}
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(secretID), VersionStage: aws.String(stage)})
	if err != nil {
		se := &SecretError{SecretID: secretID, Stage: stage, Err: err}
		var ae smithy.APIError
		if errors.As(err, &ae) {
			se.Code = ae.ErrorCode()
		}
		var hs interface{ HTTPStatusCode() int }
		if errors.As(err, &hs) {
			se.Status = hs.HTTPStatusCode()
		}
		return Secret{}, se
	}
	s, err := parse(out)
	if err != nil {
		return Secret{}, &SecretError{SecretID: secretID, Stage: stage, Err: err}
	}
	return s, nil
}

// parse reads the RDS JSON of out. Its errors never quote the secret.
func parse(out *secretsmanager.GetSecretValueOutput) (Secret, error) {
	raw := out.SecretBinary
	if out.SecretString != nil {
		raw = []byte(*out.SecretString)
	}
	var j struct {
		Username string          `json:"username"`
		Password string          `json:"password"`
		Host     string          `json:"host"`
		Port     json.RawMessage `json:"port"`
		DBName   string          `json:"dbname"`
		Engine   string          `json:"engine"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return Secret{}, fmt.Errorf("%w: the secret string is not a JSON object of strings", errFormat)
	}
	if j.Username == "" || j.Password == "" {
		return Secret{}, fmt.Errorf("%w: no username or no password", errFormat)
	}
	s := Secret{Username: j.Username, Password: j.Password, Host: j.Host, DBName: j.DBName, Engine: j.Engine,
		VersionID: aws.ToString(out.VersionId), VersionStages: out.VersionStages}
	if len(j.Port) > 0 {
		p := string(j.Port)
		if uq, err := strconv.Unquote(p); err == nil {
			p = uq // "5432" as well as 5432
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 65535 {
			return Secret{}, fmt.Errorf("%w: port is not a number from 0 to 65535", errFormat)
		}
		s.Port = n
	}
	return s, nil
}

// source is the credentials function of one Config.
type source struct {
	cfg Config

	mu      sync.Mutex
	refused string // the AWSCURRENT version id refused by the database, while it is current
}

// CredentialsFunc returns the credentials function for
// holdfast.WithCredentialsFunc (use [With] for the classification rules
// too). Each call reads the secret's AWSCURRENT version and returns its
// username and password with cfg.TTL. A call forced by the database's
// refusal of the credentials it returned (holdfast.RefusedCredentials),
// or made while a refused version is still AWSCURRENT, reads AWSPENDING
// and returns it with cfg.PendingTTL when it differs: in a single-user
// rotation's window (after setSecret, before finishSecret) that is the
// password the database wants. When neither differs from the refused
// credentials, it re-polls both every cfg.PollInterval within
// cfg.RotationWait and its context, and then returns a *RotationError.
func CredentialsFunc(cfg Config) (func(ctx context.Context, host string) (holdfast.Credentials, error), error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.TTL = cmp.Or(cfg.TTL, DefaultTTL)
	cfg.PendingTTL = cmp.Or(cfg.PendingTTL, DefaultPendingTTL)
	cfg.RotationWait = cmp.Or(cfg.RotationWait, DefaultRotationWait)
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	s := &source{cfg: cfg}
	return s.credentials, nil
}

func (c Config) validate() error {
	switch {
	case c.Client == nil:
		return &ConfigError{Pkg: "rdssecrets", Field: "Client", Why: "nil: want a *secretsmanager.Client"}
	case c.SecretID == "":
		return &ConfigError{Pkg: "rdssecrets", Field: "SecretID", Why: "empty: want the secret's name or ARN"}
	}
	return nil
}

func ttl(d time.Duration) time.Duration { return max(d, 0) }

func same(s Secret, cr holdfast.Credentials) bool {
	return s.Password == cr.Password && (cr.User == "" || s.Username == cr.User)
}

func (s *source) credentials(ctx context.Context, _ string) (holdfast.Credentials, error) {
	cfg := s.cfg
	cur, err := Get(ctx, cfg.Client, cfg.SecretID, StageCurrent)
	if err != nil {
		return holdfast.Credentials{}, err
	}
	refusedCr, forced := holdfast.RefusedCredentials(ctx)
	s.mu.Lock()
	if forced && same(cur, refusedCr) {
		s.refused = cur.VersionID
	}
	stale := s.refused != "" && s.refused == cur.VersionID
	if !stale {
		s.refused = "" // AWSCURRENT moved on: the rotation finished
	}
	s.mu.Unlock()
	if !stale {
		return holdfast.Credentials{User: cur.Username, Password: cur.Password, TTL: ttl(cfg.TTL)}, nil
	}
	// The database refused AWSCURRENT: a rotation's setSecret has run and
	// its finishSecret has not yet.
	var deadline time.Time
	if cfg.RotationWait > 0 {
		deadline = time.Now().Add(cfg.RotationWait)
	}
	refused := holdfast.Credentials{User: cur.Username, Password: cur.Password}
	for {
		pending, err := Get(ctx, cfg.Client, cfg.SecretID, StagePending)
		hasPending := err == nil
		switch {
		case err == nil && pending.VersionID != cur.VersionID && !same(pending, refused) && !(forced && same(pending, refusedCr)):
			return holdfast.Credentials{User: pending.Username, Password: pending.Password, TTL: ttl(cfg.PendingTTL)}, nil
		case err != nil && !errors.Is(err, ErrNotFound):
			return holdfast.Credentials{}, err
		}
		if deadline.IsZero() || time.Now().Add(cfg.PollInterval).After(deadline) {
			return holdfast.Credentials{}, &RotationError{SecretID: cfg.SecretID, VersionID: cur.VersionID, User: cur.Username, Pending: hasPending}
		}
		t := time.NewTimer(cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return holdfast.Credentials{}, context.Cause(ctx)
		case <-t.C:
		}
		now, err := Get(ctx, cfg.Client, cfg.SecretID, StageCurrent)
		if err != nil {
			return holdfast.Credentials{}, err
		}
		if now.VersionID != cur.VersionID {
			// finishSecret ran: the new AWSCURRENT.
			s.mu.Lock()
			s.refused = ""
			s.mu.Unlock()
			if same(now, refused) {
				return holdfast.Credentials{}, &RotationError{SecretID: cfg.SecretID, VersionID: now.VersionID, User: now.Username}
			}
			return holdfast.Credentials{User: now.Username, Password: now.Password, TTL: ttl(cfg.TTL)}, nil
		}
	}
}

// With returns the holdfast option that gives every new connection of the
// factory's pools the user and password of the secret (see
// [CredentialsFunc]), cached by the factory for cfg.TTL, with one read of
// the secret in flight at a time, and classifies the failures of reading
// it ([Rules]):
//
//	f, err := holdfast.New(rdssecrets.With(rdssecrets.Config{Client: sm, SecretID: "prod/app/db"}))
//
// A Config with a missing field makes holdfast.New return a *ConfigError
// wrapping this package's *ConfigError. It cannot be combined with
// holdfast.WithPasswordFunc, WithHostPasswordFunc, WithCredentialsFunc or
// rdsiam.With.
func With(cfg Config) holdfast.Option {
	fn, err := CredentialsFunc(cfg)
	return holdfast.WithIntegration(holdfast.Integration{
		Name:        "rdssecrets",
		Credentials: fn,
		Rules:       Rules(),
		Err:         err,
	})
}

// Reasons produced by [Rules].
const (
	ReasonThrottled    = "secretsmanager-throttled"      // ThrottlingException, 429 (Transient)
	ReasonPrefixStatus = "secretsmanager-"               // + HTTP status, e.g. "secretsmanager-503" (5xx Transient, others Fatal)
	ReasonNotFound     = "secretsmanager-not-found"      // ResourceNotFoundException (Fatal)
	ReasonDenied       = "secretsmanager-access-denied"  // AccessDeniedException (Fatal)
	ReasonDecryption   = "secretsmanager-decryption"     // DecryptionFailure: KMS (Fatal)
	ReasonInvalid      = "secretsmanager-invalid"        // InvalidParameterException, InvalidRequestException (Fatal)
	ReasonFormat       = "secretsmanager-format"         // not RDS JSON (Fatal)
	ReasonRotation     = "secretsmanager-rotation"       // RotationError with a pending version (Transient)
	ReasonMismatch     = "secretsmanager-secret-refused" // RotationError without one (Fatal)
)

// Rules returns the classification rules for the errors of the
// credentials function, for holdfast.WithClassifier ([With] adds them).
// They decide only for a [*SecretError] or a [*RotationError]:
//
//	ThrottlingException, TooManyRequestsException, HTTP 429  Transient secretsmanager-throttled
//	InternalServiceError, HTTP 500–599                       Transient secretsmanager-<status>
//	ResourceNotFoundException (a deleted secret)             Fatal     secretsmanager-not-found
//	AccessDeniedException                                    Fatal     secretsmanager-access-denied
//	DecryptionFailure (KMS)                                  Fatal     secretsmanager-decryption
//	InvalidParameterException, InvalidRequestException       Fatal     secretsmanager-invalid
//	any other HTTP status                                    Fatal     secretsmanager-<status>
//	not RDS JSON                                             Fatal     secretsmanager-format
//	RotationError, a rotation pending                        Transient secretsmanager-rotation
//	RotationError, none pending                              Fatal     secretsmanager-secret-refused
//
// A *SecretError without an API error or status (a refused or timed-out
// connection to the endpoint) is left to the built-in rules, which retry
// network failures. The rules never call Error and are safe for
// concurrent use.
func Rules() []classify.Rule { return []classify.Rule{rule} }

func rule(err error) (classify.Verdict, bool) {
	var re *RotationError
	if errors.As(err, &re) && re != nil {
		if re.Pending {
			return classify.Verdict{Class: classify.Transient, Reason: ReasonRotation}, true
		}
		return classify.Verdict{Class: classify.Fatal, Reason: ReasonMismatch}, true
	}
	var se *SecretError
	if !errors.As(err, &se) || se == nil {
		return classify.Verdict{}, false
	}
	fatal := func(r string) (classify.Verdict, bool) {
		return classify.Verdict{Class: classify.Fatal, Reason: r}, true
	}
	switch se.Code {
	case "ThrottlingException", "TooManyRequestsException", "RequestLimitExceeded", "Throttling":
		return classify.Verdict{Class: classify.Transient, Reason: ReasonThrottled}, true
	case "ResourceNotFoundException":
		return fatal(ReasonNotFound)
	case "AccessDeniedException":
		return fatal(ReasonDenied)
	case "DecryptionFailure":
		return fatal(ReasonDecryption)
	case "InvalidParameterException", "InvalidRequestException":
		return fatal(ReasonInvalid)
	}
	switch code := se.Status; {
	case code == 429:
		return classify.Verdict{Class: classify.Transient, Reason: ReasonThrottled}, true
	case code >= 500 && code <= 599:
		return classify.Verdict{Class: classify.Transient, Reason: ReasonPrefixStatus + strconv.Itoa(code)}, true
	case code != 0:
		return fatal(ReasonPrefixStatus + strconv.Itoa(code))
	}
	if errors.Is(se.Err, errFormat) {
		return fatal(ReasonFormat)
	}
	return classify.Verdict{}, false
}
