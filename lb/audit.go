package lb

import (
	"context"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Result is the outcome of a control request, as recorded in the audit
// trail.
type Result string

// Results.
const (
	ResultRunning    Result = "running"     // recorded when the work starts; a crash leaves it so
	ResultOK         Result = "ok"          // every member reached the wanted state (and drained)
	ResultNotDrained Result = "not-drained" // a drain ended with connections left: abort the deploy
	ResultRefused    Result = "refused"     // the operator may not control the group; nothing was called
	ResultLocked     Result = "locked"      // another owner holds the group; nothing was called
	ResultInvalid    Result = "invalid"     // bad request (unknown group or node); nothing was called
	ResultFailed     Result = "failed"      // an API, database or state error
	ResultCanceled   Result = "canceled"    // the caller's context ended
)

// Entry is one control request and its result in the audit trail.
type Entry struct {
	ID       int64         // assigned by the AuditLog on first Record; 0 before
	Started  time.Time     // when the request arrived
	Duration time.Duration // until the result; 0 while running
	// Operator is who asked, as the caller asserts it: the command line
	// takes it from -operator, $HOLDFAST_LB_OPERATOR or $USER, which the
	// person running it chooses. Origin records what the process could
	// see besides.
	Operator string
	Origin   Origin   // how Operator was given, the OS user, the CI's identity
	Host     string   // where the request ran
	Action   Action   // what was asked
	Group    string   // which group
	Nodes    []string // the members concerned, as Target strings
	Members  []MemberRecord
	Result   Result
	Error    string // the error message, "" on success; never holds a secret
	// Notes are warnings recorded with the request, such as a balancer
	// reached without TLS verification ([ControllerConfig].TransportNotes).
	Notes []string
}

// Origin is what the process running a request could see of who runs it,
// recorded beside the request's asserted Operator. It is evidence for
// whoever reads the audit trail, not authentication: an OS account is
// shared by everyone who can use it, and a CI variable is whatever the
// job's environment says. Entries written before holdfast-lb recorded it
// read as the zero Origin.
type Origin struct {
	// Via says how the Operator was given: "-operator",
	// "$HOLDFAST_LB_OPERATOR", "$USER", "header X-Forwarded-User from
	// trusted proxy 127.0.0.1:50312", "fixed console operator"; "" when
	// the caller did not say ([Request].OperatorVia).
	Via string `json:"via,omitempty"`
	// OSUser is the OS account of the process, such as "deploy (uid
	// 1001)", looked up by the process's user ID, not read from $USER.
	OSUser string `json:"os_user,omitempty"`
	// CI holds the identity variables of the CI system running the
	// process, by name (see [ProcessOrigin]), when there are any.
	CI map[string]string `json:"ci,omitempty"`
}

// IsZero reports whether o records nothing (an entry written before
// Origin existed).
func (o Origin) IsZero() bool { return o.Via == "" && o.OSUser == "" && len(o.CI) == 0 }

// ciVariables are the CI systems' identity variables [ProcessOrigin]
// records: who started the run, and which run it is. No URL and no token.
var ciVariables = []string{
	// GitHub Actions
	"GITHUB_ACTOR", "GITHUB_TRIGGERING_ACTOR", "GITHUB_REPOSITORY", "GITHUB_WORKFLOW", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT",
	// Jenkins (BUILD_USER_ID from the build-user-vars plugin)
	"BUILD_USER_ID", "BUILD_TAG", "JOB_NAME", "BUILD_NUMBER",
	// GitLab CI
	"GITLAB_USER_LOGIN", "CI_PROJECT_PATH", "CI_PIPELINE_ID", "CI_JOB_ID",
	// Buildkite
	"BUILDKITE_BUILD_CREATOR", "BUILDKITE_PIPELINE_SLUG", "BUILDKITE_BUILD_NUMBER", "BUILDKITE_JOB_ID",
	// CircleCI
	"CIRCLE_USERNAME", "CIRCLE_PROJECT_REPONAME", "CIRCLE_BUILD_NUM", "CIRCLE_WORKFLOW_ID",
	// Azure Pipelines
	"BUILD_REQUESTEDFOR", "BUILD_REQUESTEDFOREMAIL", "BUILD_DEFINITIONNAME", "BUILD_BUILDID",
}

// maxOriginValue bounds each recorded value.
const maxOriginValue = 200

// ProcessOrigin returns the Origin of this process (Via left empty): its
// OS account, looked up by user ID ("name (uid N)"), and the CI identity
// variables getenv (nil: os.Getenv) finds set: GitHub Actions
// (GITHUB_ACTOR, GITHUB_TRIGGERING_ACTOR, GITHUB_REPOSITORY,
// GITHUB_WORKFLOW, GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT), Jenkins
// (BUILD_USER_ID, BUILD_TAG, JOB_NAME, BUILD_NUMBER), GitLab CI
// (GITLAB_USER_LOGIN, CI_PROJECT_PATH, CI_PIPELINE_ID, CI_JOB_ID),
// Buildkite (BUILDKITE_BUILD_CREATOR, BUILDKITE_PIPELINE_SLUG,
// BUILDKITE_BUILD_NUMBER, BUILDKITE_JOB_ID), CircleCI (CIRCLE_USERNAME,
// CIRCLE_PROJECT_REPONAME, CIRCLE_BUILD_NUM, CIRCLE_WORKFLOW_ID) and Azure
// Pipelines (BUILD_REQUESTEDFOR, BUILD_REQUESTEDFOREMAIL,
// BUILD_DEFINITIONNAME, BUILD_BUILDID). Values are cut to 200 bytes and
// stripped of control characters; tokens and URLs are never read.
func ProcessOrigin(getenv func(string) string) Origin {
	if getenv == nil {
		getenv = os.Getenv
	}
	o := Origin{OSUser: osUser()}
	for _, k := range ciVariables {
		if v := cleanValue(getenv(k)); v != "" {
			if o.CI == nil {
				o.CI = map[string]string{}
			}
			o.CI[k] = v
		}
	}
	return o
}

// osUser names the process's OS account by its user ID.
func osUser() string {
	u, err := user.Current()
	if err != nil {
		if uid := os.Getuid(); uid >= 0 {
			return "unknown (uid " + strconv.Itoa(uid) + ")"
		}
		return "unknown"
	}
	if u.Uid == "" {
		return cleanValue(u.Username)
	}
	return cleanValue(u.Username) + " (uid " + u.Uid + ")"
}

// cleanValue drops control characters and cuts s to maxOriginValue bytes
// (at a rune boundary).
func cleanValue(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.TrimSpace(s))
	if len(s) <= maxOriginValue {
		return s
	}
	cut := maxOriginValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// MemberRecord is what happened to one member, in an [Entry].
type MemberRecord struct {
	Balancer    string `json:"balancer"`
	Member      string `json:"member"`
	Before      string `json:"before"`       // admin state before
	After       string `json:"after"`        // admin state after
	ConnsBefore int64  `json:"conns_before"` // ConnsUnknown (-1) when not read
	ConnsAfter  int64  `json:"conns_after"`  // last reading; -1 when not read
	FirstConns  int64  `json:"first_conns"`  // drains: first poll after forcing offline
	Polls       int    `json:"polls"`        // drains: polls made
	DurationMS  int64  `json:"duration_ms"`
	Drained     bool   `json:"drained"`
	Changed     bool   `json:"changed"` // a state change was sent
	Error       string `json:"error,omitempty"`
}

// AuditLog stores control requests and their results. [*PGStore] is the
// implementation. Record is called once when the work starts (Result
// ResultRunning) and once with the result, or once for a request refused
// up front; it assigns e.ID on the first call and updates the entry on
// later ones.
type AuditLog interface {
	Record(ctx context.Context, e *Entry) error
}

// logEntry writes the structured audit line.
func logEntry(ctx context.Context, l *slog.Logger, e *Entry) {
	level := slog.LevelInfo
	switch e.Result {
	case ResultRefused, ResultLocked, ResultNotDrained, ResultInvalid, ResultCanceled:
		level = slog.LevelWarn
	case ResultFailed:
		level = slog.LevelError
	}
	attrs := []slog.Attr{
		slog.Int64("audit_id", e.ID),
		slog.String("operator", e.Operator),
		slog.String("operator_via", e.Origin.Via),
		slog.String("os_user", e.Origin.OSUser),
		slog.String("host", e.Host),
		slog.String("action", string(e.Action)),
		slog.String("group", e.Group),
		slog.Any("nodes", e.Nodes),
		slog.String("result", string(e.Result)),
		slog.Duration("duration", e.Duration),
	}
	if len(e.Origin.CI) > 0 {
		attrs = append(attrs, slog.Any("ci", e.Origin.CI))
	}
	if e.Error != "" {
		attrs = append(attrs, slog.String("error", e.Error))
	}
	if len(e.Notes) > 0 {
		attrs = append(attrs, slog.Any("notes", e.Notes))
		if level < slog.LevelWarn {
			level = slog.LevelWarn
		}
	}
	attrs = append(attrs, slog.Any("members", e.Members))
	msg := "lb control"
	if e.Result == ResultRunning {
		msg = "lb control started"
	}
	l.LogAttrs(ctx, level, msg, attrs...)
}
