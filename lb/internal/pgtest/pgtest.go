// Package pgtest starts one throwaway PostgreSQL server per test binary for
// the lb module's tests.
//
// It is a small subset of the root module's fakes/pgtest, which the lb
// module does not import (it does not depend on the root module): [DSN]
// and [Main] only, with the same behaviour. The
// server is a fresh cluster (initdb) in a temporary directory, tuned for
// speed (fsync off), with superuser "postgres", trust authentication and no
// TLS, listening on 127.0.0.1 on a free port.
//
//   - PGTEST_DSN set: [DSN] returns it and no server is started.
//   - Binaries not found (initdb on PATH, "pg_config --bindir", or the
//     newest /usr/lib/postgresql/*/bin): [DSN] skips the test, or fails it
//     when HOLDFAST_REQUIRE_PG=1, as in CI.
//   - Running as root: initdb and the server run as the "postgres" OS user
//     (or "nobody"), in a directory under /tmp that user can reach.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/lb/internal/testbin"
	"go.uber.org/goleak"
)

var errNotFound = errors.New("pgtest: PostgreSQL server binaries (initdb, pg_ctl) not found; install postgresql or set PGTEST_DSN")

var shared struct {
	mu   sync.Mutex
	done bool // a start was attempted
	dir  string
	dsn  string
	stop func() error
	err  error
}

// DSN returns a connection string for the test binary's server, starting it
// on first use, or $PGTEST_DSN when set. It is safe for concurrent use.
func DSN(t testing.TB) string {
	t.Helper()
	if dsn := os.Getenv("PGTEST_DSN"); dsn != "" {
		return dsn
	}
	shared.mu.Lock()
	if !shared.done {
		shared.done = true
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		shared.dsn, shared.stop, shared.err = start(ctx)
		cancel()
	}
	dsn, err := shared.dsn, shared.err
	shared.mu.Unlock()
	switch {
	case err == nil:
		return dsn
	case errors.Is(err, errNotFound):
		testbin.Missing(t, "HOLDFAST_REQUIRE_PG", err.Error())
	default:
		t.Fatalf("pgtest: starting the server: %v", err)
	}
	return ""
}

// Main runs the tests, stops the server, checks for leaked goroutines when
// the tests passed, and exits. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	if shared.stop != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stopping the server: %v\n", err)
			code = 1
		}
	}
	shared.mu.Unlock()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: goroutines leaked by the tests:\n%v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// start creates a cluster and starts a server on it, returning its DSN and
// a func that stops it and removes its directory.
func start(ctx context.Context) (dsn string, stop func() error, err error) {
	bin, err := binDir()
	if err != nil {
		return "", nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return "", nil, err
	}
	parent := "" // a test TempDir's parents are 0700 root: use /tmp as root
	if cred != nil {
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, "holdfast-pg-*")
	if err != nil {
		return "", nil, fmt.Errorf("pgtest: %w", err)
	}
	data := filepath.Join(dir, "data")
	pgctl := func(ctx context.Context, args ...string) ([]byte, error) {
		return command(ctx, cred, filepath.Join(bin, "pg_ctl"), append([]string{"-D", data}, args...)...).CombinedOutput()
	}
	stop = func() error {
		if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
			_, _ = pgctl(ctx, "-m", "immediate", "-w", "-t", "60", "stop")
			cancel()
		}
		return os.RemoveAll(dir)
	}
	fail := func(step string, err error, out []byte) (string, func() error, error) {
		_ = stop()
		return "", nil, fmt.Errorf("pgtest: %s: %w\n%s", step, err, tail(out))
	}
	if err := chown(cred, dir); err != nil {
		return fail("chown", err, nil)
	}
	out, err := command(ctx, cred, filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres",
		"--no-sync", "-E", "UTF8", "--locale=C").CombinedOutput()
	if err != nil {
		return fail("initdb", err, out)
	}
	logFile := filepath.Join(dir, "server.log")
	for attempt := 1; ; attempt++ {
		addr, port, err := testbin.FreeAddr()
		if err != nil {
			return fail("pick port", err, nil)
		}
		conf := fmt.Sprintf("listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\n"+
			"fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 300\nshared_buffers = '32MB'\n",
			port, dir)
		if err := appendFile(filepath.Join(data, "postgresql.conf"), conf); err != nil {
			return fail("configure", err, nil)
		}
		out, err := pgctl(ctx, "-l", logFile, "-w", "-t", "60", "start")
		if err == nil {
			u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: addr,
				Path: "/postgres", RawQuery: "sslmode=disable"}
			return u.String(), stop, nil
		}
		log, _ := os.ReadFile(logFile)
		// Another process may have taken the port before the server bound it.
		if attempt < 5 && ctx.Err() == nil && bytes.Contains(log, []byte("could not create any TCP/IP sockets")) {
			continue // later settings in postgresql.conf override earlier ones
		}
		return fail("pg_ctl start", err, append(out, log...))
	}
}

// binDir returns the directory holding initdb, pg_ctl and postgres.
func binDir() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(r))
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(d string) float64 { v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64); return v }
	sort.SliceStable(debian, func(i, j int) bool { return major(debian[i]) > major(debian[j]) })
	for _, d := range append(dirs, debian...) {
		ok := d != ""
		for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(d, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				ok = false
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", errNotFound
}

// serverUser returns the credentials to run PostgreSQL with when the process
// is root (PostgreSQL refuses to run as root), or nil.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		if u, err = user.Lookup("nobody"); err != nil {
			return nil, fmt.Errorf("pgtest: running as root and found neither a \"postgres\" nor a \"nobody\" OS user: %w", err)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: user %q: %w", u.Username, err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{uint32(gid)}}
	// In a user namespace where setgroups is denied, keep the inherited groups.
	if b, err := os.ReadFile("/proc/self/setgroups"); err == nil && strings.TrimSpace(string(b)) == "deny" {
		cred.Groups, cred.NoSetGroups = nil, true
	}
	return cred, nil
}

func chown(cred *syscall.Credential, name string) error {
	if cred == nil {
		return nil
	}
	return os.Chown(name, int(cred.Uid), int(cred.Gid))
}

// command runs name as cred's user (nil: ourselves), without the PG*
// variables that could redirect it.
func command(ctx context.Context, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	env := []string{"LC_ALL=C", "TZ=UTC"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "LC_") || k == "LANG" || k == "TZ" || (cred != nil && k == "HOME") {
			continue
		}
		env = append(env, kv)
	}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		env = append(env, "HOME=/tmp")
		cmd.Dir = "/"
	}
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func appendFile(name, text string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tail returns the last 20 lines of b.
func tail(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
