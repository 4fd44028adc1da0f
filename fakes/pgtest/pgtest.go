package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/pgurl"
	"github.com/holdfast-db/holdfast/fakes/internal/ports"
	"github.com/jackc/pgx/v5"
)

// ErrNotFound reports that the PostgreSQL server binaries (initdb, pg_ctl and
// postgres) could not be found. It is returned, wrapped, by [BinDir] and
// [Start]; test with errors.Is. It is not retryable: install PostgreSQL (on
// Debian, apt-get install postgresql) or set PGTEST_DSN.
var ErrNotFound = errors.New("pgtest: PostgreSQL server binaries (initdb, pg_ctl) not found; install postgresql or set PGTEST_DSN")

// StartError is returned by [Start] when a step of bringing up a server fails.
// Log holds the tail of the server log (or of the failing command's output),
// which usually names the cause. Unwrap returns the underlying error. A
// StartError is not retryable as such, although [Start] itself already retries
// a start that failed because the chosen port was taken.
type StartError struct {
	Step string // what failed, e.g. "initdb" or "pg_ctl start"
	Err  error  // the underlying error
	Log  string // tail of the server log or command output; may be empty
}

// Error implements error. The message includes the log tail.
func (e *StartError) Error() string {
	msg := fmt.Sprintf("pgtest: %s: %v", e.Step, e.Err)
	if e.Log != "" {
		msg += "\n--- log tail ---\n" + e.Log
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *StartError) Unwrap() error { return e.Err }

// Options configures [Start]. The zero value listens on 127.0.0.1 on a free
// port with no extra settings.
type Options struct {
	// Host is the address the server listens on (listen_addresses). The
	// default is "127.0.0.1". Any 127.x.y.z address works on Linux, which
	// routes all of 127.0.0.0/8 to the loopback interface.
	Host string

	// Port is the TCP port. Zero picks a free port, retrying with a new
	// one if another process takes it before the server binds.
	Port int

	// Settings are extra postgresql.conf settings, for example
	// {"wal_level": "logical"}. They override the harness defaults. Names
	// must be valid GUC names (case-insensitive); values are quoted for you.
	Settings map[string]string

	// Test seams; zero values mean the defaults.
	pickPort  func(host string) (int, error) // default ports.Free
	parentDir string                         // where to create Dir
}

// Server is a running throwaway PostgreSQL server with superuser "postgres",
// trust authentication, database "postgres" and no TLS. Create one with
// [Start] and release it with [Server.Stop]; [Server.Shutdown] and
// [Server.Restart] take it down and bring it back on the same address,
// port and data. A Server's methods are safe for concurrent use; the
// exported fields must not be modified.
type Server struct {
	Host string // listen address, as in Options.Host
	Port int    // TCP port
	Dir  string // temporary directory holding the data directory, socket and log

	bin     string // directory containing initdb, pg_ctl and postgres
	dataDir string
	logFile string
	run     runner

	mu      sync.Mutex
	stopped bool
}

// defaultSettings are written to every server's configuration. Options.Settings
// overrides them.
var defaultSettings = map[string]string{
	"fsync":              "off",
	"synchronous_commit": "off",
	"full_page_writes":   "off",
	"max_connections":    "300",
	"shared_buffers":     "32MB",
	"logging_collector":  "off",
	"huge_pages":         "off",
}

var gucName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// BinDir returns the directory holding the PostgreSQL server binaries. It
// looks for initdb on PATH, then in the directory printed by
// "pg_config --bindir", then in the newest /usr/lib/postgresql/*/bin. The
// directory must also contain pg_ctl and postgres. Symbolic links are
// resolved, so a PATH entry such as /usr/local/bin/initdb pointing into
// /usr/lib/postgresql/15/bin yields the latter. The error wraps [ErrNotFound].
func BinDir() (string, error) {
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(r))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); d != "" {
			candidates = append(candidates, d)
		}
	}
	candidates = append(candidates, debianBinDirs()...)
	for _, d := range candidates {
		if hasServerBinaries(d) {
			return d, nil
		}
	}
	return "", ErrNotFound
}

// debianBinDirs returns /usr/lib/postgresql/*/bin, newest major version first.
func debianBinDirs() []string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(d string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		return v
	}
	sort.SliceStable(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	return dirs
}

func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// Start creates a fresh cluster in a new temporary directory (initdb) and
// starts a server on it (pg_ctl start), returning once it accepts
// connections. When the process runs as root, the server runs as the
// "postgres" OS user (or "nobody" if there is none), because PostgreSQL
// refuses to run as root; its directory is then created under /tmp, not in a
// test's TempDir. The caller must call [Server.Stop]. ctx bounds the whole
// start-up; if it ends, Start cleans up and returns an error. On failure the
// error is a [*StartError] carrying the tail of the server log, or wraps
// [ErrNotFound].
func Start(ctx context.Context, opts Options) (*Server, error) {
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("pgtest: invalid port %d", opts.Port)
	}
	settings := make(map[string]string, len(defaultSettings)+len(opts.Settings))
	for k, v := range defaultSettings {
		settings[k] = v
	}
	for k, v := range opts.Settings {
		if !gucName.MatchString(k) {
			return nil, fmt.Errorf("pgtest: invalid setting name %q", k)
		}
		// GUC names are case-insensitive; normalise so that overrides of
		// the defaults take effect.
		name := strings.ToLower(k)
		switch name {
		case "port", "listen_addresses", "unix_socket_directories":
			return nil, fmt.Errorf("pgtest: setting %q is managed by pgtest; use Options.Host/Port", k)
		}
		settings[name] = v
	}

	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	run, err := newRunner()
	if err != nil {
		return nil, err
	}
	dir, err := run.mkdirTemp(opts.parentDir)
	if err != nil {
		return nil, err
	}
	s := &Server{
		Host:    host,
		Dir:     dir,
		bin:     bin,
		dataDir: filepath.Join(dir, "data"),
		logFile: filepath.Join(dir, "server.log"),
		run:     run,
	}
	pickPort := opts.pickPort
	if pickPort == nil {
		pickPort = ports.Free
	}
	if err := s.start(ctx, opts.Port, pickPort, settings); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context, port int, pickPort func(string) (int, error), settings map[string]string) error {
	out, err := s.run.command(ctx, filepath.Join(s.bin, "initdb"),
		"-D", s.dataDir, "-A", "trust", "-U", "postgres", "--no-sync",
		"-E", "UTF8", "--locale=C").CombinedOutput()
	if err != nil {
		return &StartError{Step: "initdb", Err: ctxErr(ctx, err), Log: tail(out)}
	}

	// Everything we manage lives in holdfast.conf, included at the end of
	// postgresql.conf so it overrides initdb's choices.
	if err := appendFile(filepath.Join(s.dataDir, "postgresql.conf"),
		"\n# added by holdfast pgtest\ninclude 'holdfast.conf'\n"); err != nil {
		return &StartError{Step: "configure", Err: err}
	}

	const attempts = 5
	for attempt := 1; ; attempt++ {
		p := port
		if p == 0 {
			if p, err = pickPort(s.Host); err != nil {
				return &StartError{Step: "pick port", Err: err}
			}
		}
		if err := s.writeConf(p, settings); err != nil {
			return &StartError{Step: "configure", Err: err}
		}
		_ = os.Truncate(s.logFile, 0)
		out, err := s.pgctl(ctx, "-l", s.logFile, "start")
		if err == nil {
			s.Port = p
			return nil
		}
		log := s.logTail()
		if log == "" {
			log = tail(out)
		}
		// pg_ctl may have left a postmaster behind if ctx ended mid-wait.
		s.kill()
		if port == 0 && attempt < attempts && ctx.Err() == nil && portTaken(log) {
			continue
		}
		return &StartError{Step: "pg_ctl start", Err: ctxErr(ctx, err), Log: log}
	}
}

func (s *Server) writeConf(port int, settings map[string]string) error {
	var b strings.Builder
	b.WriteString("# written by holdfast pgtest\n")
	fmt.Fprintf(&b, "listen_addresses = %s\n", QuoteConf(s.Host))
	fmt.Fprintf(&b, "port = %d\n", port)
	fmt.Fprintf(&b, "unix_socket_directories = %s\n", QuoteConf(s.Dir))
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, QuoteConf(settings[k]))
	}
	name := filepath.Join(s.dataDir, "holdfast.conf")
	if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return s.run.chown(name)
}

// portTaken reports whether a server log says the listen port was in use.
func portTaken(log string) bool {
	return strings.Contains(log, "already in use") ||
		strings.Contains(log, "could not create any TCP/IP sockets") ||
		strings.Contains(log, "could not bind")
}

// DSN returns a connection string for the server:
// "postgres://postgres@HOST:PORT/postgres?sslmode=disable".
func (s *Server) DSN() string {
	return pgurl.Superuser(s.Addr(), "postgres", "sslmode=disable")
}

// Addr returns the server's TCP address, "HOST:PORT".
func (s *Server) Addr() string {
	return net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
}

// Exec connects to the server as the superuser, runs sql (which may contain
// several statements but no parameters) and disconnects.
func (s *Server) Exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return fmt.Errorf("pgtest: connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgtest: exec: %w", err)
	}
	return nil
}

// PrependHBA puts rules (pg_hba.conf lines, each ending in a newline)
// before the server's own trust rules, so that they win for what they
// match (the first matching line does), and reloads the configuration. It
// returns once new connections are authenticated by them.
func (s *Server) PrependHBA(ctx context.Context, rules string) error {
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return fmt.Errorf("pgtest: connect: %w", err)
	}
	defer conn.Close(context.Background())
	loaded := func(c *pgx.Conn) (t time.Time, err error) {
		err = c.QueryRow(ctx, "SELECT pg_conf_load_time()").Scan(&t)
		return t, err
	}
	before, err := loaded(conn)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	hba := filepath.Join(s.dataDir, "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if err := os.WriteFile(hba, append([]byte(rules), old...), 0o600); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	// The reload is asynchronous. A new session reports when the
	// postmaster last loaded its configuration (pg_hba.conf with it).
	for {
		c, err := pgx.Connect(ctx, s.DSN())
		if err == nil {
			at, qerr := loaded(c)
			c.Close(context.Background())
			if qerr == nil && at.After(before) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: pg_hba.conf not reloaded: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// PasswordRole creates a login role that must authenticate with password
// (scram-sha-256: a wrong password is refused with 28P01, while every
// other user stays trusted, as the server is set up) and returns once new
// connections are authenticated so. It is the setup of every test of a
// password, token or secret.
func (s *Server) PasswordRole(ctx context.Context, role, password string) error {
	ident := pgx.Identifier{role}.Sanitize()
	lit := "'" + strings.ReplaceAll(password, "'", "''") + "'"
	if err := s.Exec(ctx, "SET password_encryption = 'scram-sha-256'; CREATE ROLE "+ident+" LOGIN PASSWORD "+lit); err != nil {
		return err
	}
	return s.PrependHBA(ctx, "host all "+ident+" 0.0.0.0/0 scram-sha-256\n")
}

// Stop stops the server immediately (pg_ctl stop -m immediate) and removes its
// directory. It is idempotent and safe to call if the server process has
// already died; calls after the first return nil. It blocks until the server
// has exited, at most about a minute.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	s.kill()
	if err := os.RemoveAll(s.Dir); err != nil {
		return fmt.Errorf("pgtest: remove %s: %w", s.Dir, err)
	}
	return nil
}

// kill stops the postmaster if one is running on the data directory.
func (s *Server) kill() {
	pidFile := filepath.Join(s.dataDir, "postmaster.pid")
	if _, err := os.Stat(pidFile); err != nil {
		return // never started, or already shut down cleanly
	}
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	// Errors are expected when the server already died; the pid-file check
	// below covers a server that pg_ctl could not stop.
	_, _ = s.pgctl(ctx, "-m", "immediate", "stop")
	killPostmaster(pidFile, s.dataDir)
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logFile)
	if err != nil {
		return ""
	}
	return tail(b)
}

// tail returns roughly the last 20 lines of b, at most 4 KiB.
func tail(b []byte) string {
	b = bytes.TrimRight(b, "\n")
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// ctxErr prefers the context's error when ctx ended, since a killed command's
// own error ("signal: killed") hides why.
func ctxErr(ctx context.Context, err error) error {
	if cerr := context.Cause(ctx); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}
