package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
)

// ShutdownMode is how [Server.Shutdown] stops a server: pg_ctl stop's -m.
type ShutdownMode string

// The modes of [Server.Shutdown].
const (
	// ShutdownSmart waits for every client to disconnect first (pg_ctl
	// gives up after 60 s while one stays).
	ShutdownSmart ShutdownMode = "smart"
	// ShutdownFast ends every session (its client gets FATAL 57P01,
	// "terminating connection due to administrator command") and shuts
	// down cleanly, with a checkpoint: what a restart for maintenance
	// does.
	ShutdownFast ShutdownMode = "fast"
	// ShutdownImmediate is a crash: every process quits at once, clients'
	// connections are closed without a goodbye, and the next start
	// recovers from the WAL.
	ShutdownImmediate ShutdownMode = "immediate"
)

// ErrStopped is matched (errors.Is) by the error of [Server.Shutdown] and
// [Server.Restart] on a server that [Server.Stop] removed.
var ErrStopped = errors.New("pgtest: the server was stopped and removed")

// Shutdown stops the server (pg_ctl stop -m mode) and keeps its data
// directory, address and port, so that [Server.Restart] can start it
// again: while it is down, connections to its address are refused. It
// returns once the server has exited; on a server that is down already
// it does nothing. [Server.Stop] still removes it. Shutdown and Restart
// of one server are serialised.
func (s *Server) Shutdown(ctx context.Context, mode ShutdownMode) error {
	switch mode {
	case ShutdownSmart, ShutdownFast, ShutdownImmediate:
	default:
		return fmt.Errorf("pgtest: unknown shutdown mode %q", mode)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	return s.shutdown(ctx, mode)
}

// shutdown stops a running server; s.mu is held.
func (s *Server) shutdown(ctx context.Context, mode ShutdownMode) error {
	running, err := s.running(ctx)
	if err != nil || !running {
		return err
	}
	if out, err := s.pgctl(ctx, "-m", string(mode), "stop"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop -m %s: %w\n%s", mode, ctxErr(ctx, err), tail(out))
	}
	return nil
}

// Restart starts the server again on its data directory, address and
// port, shutting it down fast first if it runs (its clients get 57P01),
// and returns once it accepts connections. It fails, with a
// [*StartError] carrying the server log's tail, when the server cannot
// start: for example when another process took its port while it was
// down.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	if err := s.shutdown(ctx, ShutdownFast); err != nil {
		return err
	}
	if out, err := s.pgctl(ctx, "-l", s.logFile, "start"); err != nil {
		log := s.logTail()
		if log == "" {
			log = tail(out)
		}
		s.kill() // pg_ctl may have left a postmaster behind if ctx ended mid-wait
		return &StartError{Step: "pg_ctl start", Err: ctxErr(ctx, err), Log: log}
	}
	return nil
}

// running reports whether a server runs on the data directory (pg_ctl
// status: 0 it runs, 3 it does not).
func (s *Server) running(ctx context.Context) (bool, error) {
	out, err := s.pgctl(ctx, "status")
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		return false, nil
	}
	return false, fmt.Errorf("pgtest: pg_ctl status: %w\n%s", ctxErr(ctx, err), tail(out))
}

// pgctl runs pg_ctl on the data directory, waiting (-w) up to 60 s for
// what it does, and returns its output.
func (s *Server) pgctl(ctx context.Context, args ...string) ([]byte, error) {
	args = append([]string{"-D", s.dataDir, "-w", "-t", "60"}, args...)
	return s.run.command(ctx, filepath.Join(s.bin, "pg_ctl"), args...).CombinedOutput()
}
