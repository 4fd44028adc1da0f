package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/alertmanager"
	"github.com/holdfast-db/holdfast/lb/deploy"
)

// deploy runs holdfast-lb deploy GROUP -- COMMAND [ARGS].
func (r *runner) deploy(ctx context.Context, su *setup, ctrl *lb.Controller, op, via, group string, cf cmdFlags) int {
	var silencer deploy.Silencer
	if am := su.cfg.Alertmanager; am != nil {
		s, err := alertmanager.FromSettings(am, nil)
		if err != nil {
			return r.errorf(exitUsage, "deploy: %v", err)
		}
		silencer = s
		if cf.silenceFor > am.SilenceMax() {
			return r.errorf(exitUsage, "deploy: -silence %s is longer than alertmanager.max_duration (%s)", cf.silenceFor, am.SilenceMax())
		}
	}
	progress := newProgressLine(r.stderr, isTerminal(r.stderr))
	waited := false
	req := deploy.Request{
		Operator: op, OperatorVia: via, Group: group, Nodes: cf.nodes, Command: cf.command,
		Stdin: os.Stdin, Stdout: r.stdout, Stderr: r.stderr,
		LockWait: cf.lockWait, SilenceFor: cf.silenceFor, SilenceOptional: cf.silenceOptional,
		RestoreOnFailure: cf.restore, LeaveOfflineOnFailure: cf.leaveOffline,
		Progress: progress.update,
		Log: func(s string) {
			progress.end()
			fmt.Fprintln(r.stderr, "holdfast-lb: "+s)
		},
		OnLockWait: func(le *lb.LockedError) {
			if !waited {
				waited = true
				fmt.Fprintf(r.stderr, "holdfast-lb: deploy %s: waiting up to %s for the lock held by %s\n", group, cf.lockWait, le.Holder.String())
			}
		},
	}
	res, err := deploy.Run(ctx, deploy.Config{Controller: ctrl, Silencer: silencer, Notifier: su.notifier}, req)
	progress.end()
	if err == nil {
		fmt.Fprintf(r.stdout, "ok: deploy %s: drained, deployed and enabled %d members in %s\n", group, len(res.Enable.Members), res.Duration.Round(time.Millisecond))
		return exitOK
	}
	var de *deploy.Error
	if !errors.As(err, &de) {
		return r.errorf(exitUsage, "deploy: %v", err)
	}
	switch de.Step {
	case deploy.StepLock:
		switch {
		case errors.Is(err, lb.ErrLocked), errors.Is(err, lb.ErrNotPermitted):
			return r.errorf(exitRefused, "refused: %v", de.Err)
		case errors.Is(err, lb.ErrInvalidConfig):
			return r.errorf(exitUsage, "deploy: %v", de.Err)
		}
		return r.errorf(exitFailed, "deploy %s: %v", group, err)
	case deploy.StepDrain:
		if res.Drain != nil && res.Drain.Entry.Result == lb.ResultNotDrained {
			r.errorf(exitNotDrained, "NOT DRAINED: %v (audit #%d)", de.Err, res.Drain.Entry.ID)
			return r.errorf(exitNotDrained, "deploy %s stopped: %s", group, de.Note)
		}
		return r.errorf(exitFailed, "deploy %s: %v", group, err)
	case deploy.StepCommand:
		var ce *deploy.CommandError
		if errors.As(err, &ce) {
			return r.errorf(exitCommand, "deploy %s: the command failed (%v): %s", group, ce.Err, de.Note)
		}
		return r.errorf(exitFailed, "deploy %s: %v", group, err)
	}
	return r.errorf(exitFailed, "deploy %s: %v", group, err)
}

// versionText is the module's version as the build recorded it.
func versionText() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "holdfast-lb (unknown version)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	return strings.TrimSpace("holdfast-lb " + v + " " + bi.GoVersion)
}
