package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runner runs PostgreSQL commands, as another OS user when the process is
// root (PostgreSQL refuses to run as root).
type runner struct {
	cred *syscall.Credential // nil: run as ourselves
}

func newRunner() (runner, error) {
	cred, err := ServerUser()
	if err != nil {
		return runner{}, fmt.Errorf("pgtest: %w", err)
	}
	return runner{cred: cred}, nil
}

// mkdirTemp creates the server's directory, owned by the user the server
// runs as. As root it lives directly under /tmp, whose parents everyone can
// traverse (a test's TempDir sits below 0700 directories owned by root).
// parent overrides the parent directory (for tests).
func (r runner) mkdirTemp(parent string) (string, error) {
	if parent == "" && r.cred != nil {
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, "holdfast-pg-*")
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	if err := r.chown(dir); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return dir, nil
}

func (r runner) chown(name string) error {
	if r.cred == nil {
		return nil
	}
	return os.Chown(name, int(r.cred.Uid), int(r.cred.Gid))
}

// command returns a command running name as the server's OS user, with an
// environment free of PG* variables that could redirect it.
func (r runner) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	env := []string{"LC_ALL=C", "TZ=UTC"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "LC_") || k == "LANG" || k == "TZ" ||
			(r.cred != nil && k == "HOME") {
			continue
		}
		env = append(env, kv)
	}
	if r.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
		env = append(env, "HOME=/tmp")
		cmd.Dir = "/"
	}
	cmd.Env = env
	// pg_ctl's postmaster does not keep our output pipes, but never let
	// Wait hang on them if it did.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// killPostmaster kills the process named in a postmaster.pid that is still
// present after pg_ctl stop, then waits briefly for it to exit. Its children
// exit on their own when they notice the postmaster is gone. To avoid killing
// an unrelated process that reused the pid, it acts only when the process's
// working directory is the data directory (the postmaster chdirs there),
// which it can check only on Linux.
func killPostmaster(pidFile, dataDir string) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil || pid <= 0 {
		return
	}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if real, err := filepath.EvalSymlinks(dataDir); err == nil {
		dataDir = real
	}
	if err != nil || filepath.Clean(cwd) != filepath.Clean(dataDir) {
		return
	}
	if syscall.Kill(pid, syscall.SIGKILL) != nil {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && alive(pid) {
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether process pid exists and is not a zombie (an exited
// postmaster is reparented to init, which may reap it late).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}
