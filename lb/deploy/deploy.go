package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/holdfast-db/holdfast/lb"
)

// Silencer silences a group's alerts for the window: an
// [*github.com/holdfast-db/holdfast/lb/alertmanager.Silencer].
type Silencer interface {
	// Silence creates the group's silence for d (0: the maximum) and
	// returns its id and duration, or "" when the group has no matchers.
	Silence(ctx context.Context, group, operator, comment string, d time.Duration) (string, time.Duration, error)
	// Expire ends the silence.
	Expire(ctx context.Context, id string) error
}

// Config configures [Run].
type Config struct {
	// Controller runs the drain and the enable. Required.
	Controller *lb.Controller
	// Silencer, if not nil, silences the group's alerts for the window.
	Silencer Silencer
	// Notifier, if not nil, is told when the deploy's command fails, or
	// when the silence cannot be made (the controller tells its own
	// notifier about the drain and the enable).
	Notifier lb.Notifier
	// Host is recorded in events. Default os.Hostname().
	Host string
}

// Request is one deploy.
type Request struct {
	Operator string // who deploys; checked against the permissions. Required.
	// OperatorVia says how Operator was established, for the audit
	// (lb.Request.OperatorVia).
	OperatorVia string
	Group       string   // the group deployed. Required.
	Nodes       []string // some nodes of the group only; empty means all
	// Command is run once the group is drained: Command[0] is looked up
	// in PATH, the rest are its arguments. Required.
	Command []string
	// Env is added to the command's environment (os.Environ plus
	// HOLDFAST_LB_GROUP, HOLDFAST_LB_OPERATOR, HOLDFAST_LB_NODES,
	// HOLDFAST_LB_AUDIT_ID and HOLDFAST_LB_SILENCE_ID).
	Env []string
	// Dir is the command's working directory; "" is the current one.
	Dir string
	// Stdin, Stdout and Stderr are the command's; nil means none
	// (os.DevNull).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// LockWait is how long to wait for a group someone else holds.
	LockWait time.Duration
	// OnLockWait is called each time the lock is found taken while
	// waiting.
	OnLockWait func(*lb.LockedError)
	// SilenceFor is how long the silence lasts at most (0: the
	// Silencer's maximum, which also bounds it); it is expired as soon as
	// the deploy ends.
	SilenceFor time.Duration
	// SilenceOptional goes on without a silence when Alertmanager fails;
	// by default the deploy stops before the drain.
	SilenceOptional bool
	// RestoreOnFailure puts the members back as they were when the drain
	// fails (by default they stay forced offline).
	RestoreOnFailure bool
	// LeaveOfflineOnFailure leaves the members forced offline when the
	// command fails, instead of enabling them again, for someone to look
	// at; the deploy says so.
	LeaveOfflineOnFailure bool
	// Progress is the drain's progress (see lb.Request.Progress).
	Progress func(lb.Progress)
	// Log, if not nil, receives one line per step, for people.
	Log func(string)
}

// Step names a step of a deploy.
type Step string

// Steps, in order.
const (
	StepLock    Step = "lock"
	StepSilence Step = "silence"
	StepDrain   Step = "drain"
	StepCommand Step = "command"
	StepEnable  Step = "enable"
)

// Result is what a deploy did.
type Result struct {
	SilenceID   string        // "" when none was made
	SilenceFor  time.Duration // the silence's bound
	Drain       *lb.Outcome   // nil when the drain did not start
	Enable      *lb.Outcome   // nil when the group was not enabled
	ExitCode    int           // the command's; -1 when it did not run or was killed
	LeftOffline bool          // the command failed and the members were left forced offline
	ExpireErr   error         // the silence could not be expired (it ends by itself at its bound)
	Duration    time.Duration
}

// ErrDeploy is matched by every [*Error].
var ErrDeploy = errors.New("deploy: failed")

// Error is a deploy that stopped at Step. Err is the step's error: an
// [*lb.LockedError] or [*lb.NotPermittedError] (lock), an Alertmanager
// error (silence), an [*lb.NotDrainedError] or an [*lb.APIError]
// (drain, enable), or a [*CommandError]. Whether it is worth another
// try is Err's to say; a not-drained group may drain later, a command
// that failed will likely fail again.
type Error struct {
	Step Step
	Err  error
	// Note says what state the group is left in, for people.
	Note string
}

// Error returns for example "deploy: drain: lb: f5 web/web-1:443 not
// drained: 3 current connections after 2m0s".
func (e *Error) Error() string {
	s := "deploy: " + string(e.Step) + ": " + e.Err.Error()
	if e.Note != "" {
		s += " (" + e.Note + ")"
	}
	return s
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Is matches [ErrDeploy].
func (e *Error) Is(target error) bool { return target == ErrDeploy }

// CommandError is a deploy command that failed: it exited with ExitCode
// (-1 when it could not start or was killed), or could not be started
// (Err).
type CommandError struct {
	Command  string
	ExitCode int
	Err      error
}

// Error returns for example "./deploy.sh: exit status 3".
func (e *CommandError) Error() string { return e.Command + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *CommandError) Unwrap() error { return e.Err }

// cleanupTimeout bounds expiring the silence and releasing the lock,
// which run even when the deploy's context has ended.
const cleanupTimeout = 30 * time.Second

// commandGrace is how long a canceled command has between SIGTERM and
// SIGKILL.
const commandGrace = 10 * time.Second

// Run deploys, holding the group's lock from the first step to the last:
//
//  1. take the lock (waiting up to LockWait) after checking the
//     operator's permission;
//  2. silence the group's alerts (Silencer), bounded by its maximum;
//  3. drain the members to zero connections; if they do not drain, stop:
//     the command does not run;
//  4. run the command;
//  5. enable the members, or, when the command failed and
//     LeaveOfflineOnFailure is set, leave them forced offline and say so;
//  6. expire the silence (also on every failure after step 2);
//  7. release the lock.
//
// The drain and the enable are audited and notified by the Controller.
// Run returns a *[Error] naming the step that failed, and the Result as
// far as it went.
func Run(ctx context.Context, cfg Config, req Request) (*Result, error) {
	start := time.Now()
	res := &Result{ExitCode: -1}
	defer func() { res.Duration = time.Since(start) }()
	if cfg.Controller == nil {
		return res, &lb.ConfigError{Pkg: "deploy", Field: "Controller", Why: "must not be nil"}
	}
	if len(req.Command) == 0 || req.Command[0] == "" {
		return res, &lb.ConfigError{Pkg: "deploy", Field: "Command", Why: "no command to run"}
	}
	if req.SilenceFor < 0 || req.LockWait < 0 {
		return res, &lb.ConfigError{Pkg: "deploy", Field: "Request", Why: "SilenceFor and LockWait must not be negative"}
	}
	host := cfg.Host
	if host == "" {
		host, _ = os.Hostname()
	}
	say := func(format string, a ...any) {
		if req.Log != nil {
			req.Log(fmt.Sprintf("deploy %s: ", req.Group) + fmt.Sprintf(format, a...))
		}
	}
	event := func(kind lb.EventKind, errText, note string) {
		if cfg.Notifier == nil {
			return
		}
		e := lb.Event{Kind: kind, Time: time.Now(), Group: req.Group, Operator: req.Operator, Host: host, Action: lb.ActionDrain, Error: errText, Note: note, Duration: time.Since(start)}
		if res.Drain != nil {
			e.Members, e.AuditID = res.Drain.Entry.Nodes, res.Drain.Entry.ID
		}
		cfg.Notifier.Notify(e)
	}
	base := lb.Request{Operator: req.Operator, OperatorVia: req.OperatorVia, Group: req.Group, Nodes: req.Nodes}

	// 1. The lock, held to the end.
	lockReq := base
	lockReq.Action, lockReq.LockWait, lockReq.OnLockWait = lb.ActionDrain, req.LockWait, req.OnLockWait
	lease, _, err := cfg.Controller.Acquire(ctx, lockReq)
	if err != nil {
		return res, &Error{Step: StepLock, Err: err, Note: "nothing was changed"}
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = lease.Release(cctx)
	}()
	h := lease.Holder()
	say("lock taken by %s", h.String())

	// 2. The silence, expired whatever happens next.
	if cfg.Silencer != nil {
		// The program only: its arguments may hold secrets, and
		// Alertmanager shows the comment to everyone.
		comment := "holdfast-lb deploy of " + req.Group + " by " + req.Operator + " on " + host + ": " + filepath.Base(req.Command[0])
		id, d, err := cfg.Silencer.Silence(ctx, req.Group, req.Operator, comment, req.SilenceFor)
		switch {
		case err != nil && !req.SilenceOptional:
			event(lb.EventDeployFailed, "silence: "+err.Error(), "nothing was changed")
			return res, &Error{Step: StepSilence, Err: err, Note: "nothing was changed"}
		case err != nil:
			say("WARNING: no silence (%v); going on without it", err)
		case id == "":
			say("no alert silenced: the group has no Alertmanager matchers")
		default:
			res.SilenceID, res.SilenceFor = id, d
			say("alerts silenced: silence %s for at most %s", id, d)
			defer func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
				defer cancel()
				if err := cfg.Silencer.Expire(cctx, id); err != nil {
					res.ExpireErr = err
					say("WARNING: silence %s not expired (%v): it ends by itself by %s", id, err, start.Add(d).UTC().Format(time.RFC3339))
					return
				}
				say("silence %s expired", id)
			}()
		}
	}

	// 3. The drain, to zero connections.
	drainReq := base
	drainReq.Action, drainReq.Lease, drainReq.RestoreOnFailure, drainReq.Progress = lb.ActionDrain, lease, req.RestoreOnFailure, req.Progress
	say("draining")
	out, err := cfg.Controller.Do(ctx, drainReq)
	res.Drain = out
	if err != nil {
		note := "the command was not run; the members forced offline are left so (holdfast-lb enable " + req.Group + " puts them back)"
		if req.RestoreOnFailure {
			note = "the command was not run; the members were put back as they were"
		}
		return res, &Error{Step: StepDrain, Err: err, Note: note}
	}
	say("drained: no connection left on %d members in %s (audit #%d)", len(out.Members), out.Entry.Duration.Round(time.Millisecond), out.Entry.ID)

	// 4. The command, if the lock is still ours.
	if err := lease.Check(ctx); err != nil {
		return res, &Error{Step: StepCommand, Err: err, Note: "the command was not run; the members are left forced offline"}
	}
	say("running %s (%s)", req.Command[0], plural(len(req.Command)-1, "argument"))
	cmdErr := runCommand(ctx, req, out, res)
	if cmdErr != nil && (req.LeaveOfflineOnFailure || ctx.Err() != nil) {
		res.LeftOffline = true
		note := fmt.Sprintf("left forced offline: %d members; enable them with holdfast-lb enable %s once fixed", len(out.Members), req.Group)
		if ctx.Err() != nil {
			note = "canceled during the command; " + note
		}
		say("the command failed (%v): %s", cmdErr, note)
		event(lb.EventDeployFailed, cmdErr.Error(), note)
		return res, &Error{Step: StepCommand, Err: cmdErr, Note: note}
	}
	if cmdErr != nil {
		say("the command failed (%v): enabling the members again", cmdErr)
	} else {
		say("the command succeeded")
	}

	// 5. Enable.
	enableReq := base
	enableReq.Action, enableReq.Lease = lb.ActionEnable, lease
	en, err := cfg.Controller.Do(ctx, enableReq)
	res.Enable = en
	if err != nil {
		note := "the members may still be forced offline"
		if cmdErr != nil {
			err = errors.Join(cmdErr, err)
		}
		event(lb.EventDeployFailed, err.Error(), note)
		return res, &Error{Step: StepEnable, Err: err, Note: note}
	}
	say("enabled: %d members (audit #%d)", len(en.Members), en.Entry.ID)
	if cmdErr != nil {
		note := "the members were enabled again"
		event(lb.EventDeployFailed, cmdErr.Error(), note)
		return res, &Error{Step: StepCommand, Err: cmdErr, Note: note}
	}
	return res, nil
}

// runCommand runs the deploy command with the group in its environment.
func runCommand(ctx context.Context, req Request, drained *lb.Outcome, res *Result) error {
	name := strings.Join(req.Command, " ")
	cmd := exec.CommandContext(ctx, req.Command[0], req.Command[1:]...)
	cmd.Dir = req.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = req.Stdin, req.Stdout, req.Stderr
	var nodes []string
	for _, m := range drained.Members {
		nodes = append(nodes, m.Target.Node)
	}
	cmd.Env = append(os.Environ(), req.Env...)
	cmd.Env = append(cmd.Env,
		"HOLDFAST_LB_GROUP="+req.Group,
		"HOLDFAST_LB_OPERATOR="+req.Operator,
		"HOLDFAST_LB_NODES="+strings.Join(nodes, " "),
		"HOLDFAST_LB_AUDIT_ID="+strconv.FormatInt(drained.Entry.ID, 10),
		"HOLDFAST_LB_SILENCE_ID="+res.SilenceID,
	)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = commandGrace
	err := cmd.Run()
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
		}
		return &CommandError{Command: name, ExitCode: res.ExitCode, Err: err}
	}
	return nil
}

func plural(n int, noun string) string {
	s := strconv.Itoa(n) + " " + noun
	if n != 1 {
		s += "s"
	}
	return s
}
