package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/ports"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) { Main(m) }

// requireBinaries skips (or fails, under HOLDFAST_REQUIRE_PG=1) when the
// server binaries are missing, like DSN does.
func requireBinaries(t *testing.T) {
	t.Helper()
	if _, err := BinDir(); err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func selectOne(ctx context.Context, t *testing.T, dsn string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
		t.Fatalf("SELECT 1: %v", err)
	}
	if n != 1 {
		t.Fatalf("SELECT 1 = %d", n)
	}
}

func TestStartStop(t *testing.T) {
	requireBinaries(t)
	tests := []struct {
		name string
		host string
		want string // expected Server.Host
	}{
		{name: "default host", host: "", want: "127.0.0.1"},
		{name: "other loopback address", host: "127.0.0.11", want: "127.0.0.11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			begin := time.Now()
			s, err := Start(ctx, Options{Host: tt.host})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Start took %v", time.Since(begin))
			t.Cleanup(func() { _ = s.Stop() })

			if s.Host != tt.want {
				t.Errorf("Host = %q, want %q", s.Host, tt.want)
			}
			if s.Port <= 0 {
				t.Errorf("Port = %d", s.Port)
			}
			wantDSN := "postgres://postgres@" + tt.want + ":" + itoa(s.Port) + "/postgres?sslmode=disable"
			if s.DSN() != wantDSN {
				t.Errorf("DSN() = %q, want %q", s.DSN(), wantDSN)
			}
			if s.Addr() != tt.want+":"+itoa(s.Port) {
				t.Errorf("Addr() = %q", s.Addr())
			}
			selectOne(ctx, t, s.DSN())
			if os.Geteuid() == 0 {
				// As root, the server must run as another user in a
				// directory that user owns.
				var fi os.FileInfo
				if fi, err = os.Stat(s.Dir); err != nil {
					t.Fatal(err)
				}
				if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid == 0 {
					t.Errorf("running as root, Dir %s is owned by root; want the postgres user", s.Dir)
				}
				if filepath.Dir(s.Dir) != "/tmp" {
					t.Errorf("running as root, Dir = %s; want it directly under /tmp", s.Dir)
				}
			}

			// The server must listen on exactly the requested address.
			conn, err := pgx.Connect(ctx, s.DSN())
			if err != nil {
				t.Fatal(err)
			}
			var addr string
			if err := conn.QueryRow(ctx, "SELECT host(inet_server_addr())").Scan(&addr); err != nil {
				t.Fatal(err)
			}
			conn.Close(ctx)
			if addr != tt.want {
				t.Errorf("inet_server_addr() = %q, want %q", addr, tt.want)
			}

			if err := s.Stop(); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after Stop, Dir %s: err = %v, want not exist", s.Dir, err)
			}
			if c, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second); err == nil {
				c.Close()
				t.Errorf("after Stop, %s still accepts connections", s.Addr())
			}
			if err := s.Stop(); err != nil {
				t.Errorf("second Stop: %v", err)
			}
		})
	}
}

func TestSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers of its own: skipped with -short")
	}
	t.Parallel()
	requireBinaries(t)
	ctx := testContext(t)
	s, err := Start(ctx, Options{Settings: map[string]string{
		"application_name": `it's \ quoted`,
		"WORK_MEM":         "8MB",  // names are case-insensitive
		"shared_buffers":   "16MB", // overrides the default
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, tc := range []struct{ name, want string }{
		{"work_mem", "8MB"},
		{"fsync", "off"},
		{"max_connections", "300"},
		{"shared_buffers", "16MB"},
	} {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", tc.name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, got, tc.want)
		}
	}
	var appName string
	if err := conn.QueryRow(ctx, "SELECT setting FROM pg_settings WHERE name = 'application_name'").Scan(&appName); err != nil {
		t.Fatal(err)
	}
	if appName != `it's \ quoted` {
		t.Errorf("application_name = %q, want the quoted value from Settings", appName)
	}
	if err := s.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatalf("Exec: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Errorf("after Exec, count = %d, %v; want 1", n, err)
	}
	if err := s.Exec(ctx, "SELECT * FROM missing_table"); err == nil {
		t.Error("Exec of a bad statement returned nil")
	}
}

// PrependHBA's rules win over the trust rules and apply to the first
// connection after it returns: a rejected role is refused at once, others
// still connect.
func TestPrependHBA(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own: skipped with -short")
	}
	t.Parallel()
	requireBinaries(t)
	ctx := testContext(t)
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if err := s.Exec(ctx, "CREATE ROLE shut_out LOGIN"); err != nil {
		t.Fatal(err)
	}
	if err := s.PrependHBA(ctx, "host all shut_out 0.0.0.0/0 reject\n"); err != nil {
		t.Fatal(err)
	}
	_, err = pgx.Connect(ctx, fmt.Sprintf("postgres://shut_out@%s/postgres?sslmode=disable", s.Addr()))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28000" {
		t.Errorf("connecting as the rejected role: %v, want 28000 at once", err)
	}
	selectOne(ctx, t, s.DSN()) // the superuser is still trusted
}

func TestStartOptionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{name: "bad setting name", opts: Options{Settings: map[string]string{"a b": "1"}}, want: "invalid setting name"},
		{name: "managed setting", opts: Options{Settings: map[string]string{"port": "1"}}, want: "managed by pgtest"},
		{name: "bad port", opts: Options{Port: -1}, want: "invalid port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Start(context.Background(), tt.opts)
			if err == nil {
				s.Stop()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "pgtest: ") {
				t.Errorf("err = %v, want pgtest: ...%s", err, tt.want)
			}
		})
	}
}

func TestStartFailureIncludesLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers of its own: skipped with -short")
	}
	t.Parallel()
	requireBinaries(t)
	ctx := testContext(t)
	parent := privateParent(t)
	s, err := Start(ctx, Options{Settings: map[string]string{"no_such_setting": "1"}, parentDir: parent})
	if err == nil {
		s.Stop()
		t.Fatal("Start with an unknown setting succeeded")
	}
	var se *StartError
	if !errors.As(err, &se) {
		t.Fatalf("err = %T %v, want *StartError", err, err)
	}
	if se.Step != "pg_ctl start" || !strings.Contains(se.Log, "no_such_setting") {
		t.Errorf("StartError{Step: %q, Log: %q}; want pg_ctl start with a log naming the setting", se.Step, se.Log)
	}
	if !strings.Contains(err.Error(), "no_such_setting") {
		t.Errorf("Error() lacks the log tail: %v", err)
	}
	assertEmptyDir(t, parent)
}

// privateParent returns a fresh directory for Options.parentDir that the
// server's OS user can reach, removed at the end of the test.
func privateParent(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "holdfast-pgtest-parent-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("leftover after failed Start: %s", filepath.Join(dir, e.Name()))
	}
}

func TestPortInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers of its own: skipped with -short")
	}
	t.Parallel()
	requireBinaries(t)
	ctx := testContext(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	parent := privateParent(t)
	s, err := Start(ctx, Options{Port: port, parentDir: parent})
	if err == nil {
		s.Stop()
		t.Fatalf("Start on busy port %d succeeded", port)
	}
	if !strings.Contains(err.Error(), "already in use") {
		t.Errorf("err = %v; want the log tail saying the port is in use", err)
	}
	assertEmptyDir(t, parent)
}

// TestPortRetry checks that Start picks another port when the first free
// port it chose was taken before the server could bind it.
func TestPortRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers of its own: skipped with -short")
	}
	t.Parallel()
	requireBinaries(t)
	ctx := testContext(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	var picked []int
	pick := func(host string) (int, error) {
		if len(picked) == 0 {
			picked = append(picked, busy)
			return busy, nil
		}
		p, err := ports.Free(host)
		picked = append(picked, p)
		return p, err
	}
	s, err := Start(ctx, Options{pickPort: pick})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if len(picked) != 2 || s.Port != picked[1] || s.Port == busy {
		t.Errorf("picked ports %v, server on %d; want a retry on a new port after %d", picked, s.Port, busy)
	}
	selectOne(ctx, t, s.DSN())
}

func TestStopAfterServerDied(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills servers of its own: skipped with -short")
	}
	t.Parallel()
	requireBinaries(t)
	ctx := testContext(t)
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Stop the server behind the harness's back.
	if out, err := s.run.command(ctx, filepath.Join(s.bin, "pg_ctl"), "-D", s.dataDir, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop after the server died: %v", err)
	}
	if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Dir %s still exists: %v", s.Dir, err)
	}
}

func TestDSNFromEnv(t *testing.T) {
	const want = "postgres://u@example.invalid:1/db"
	t.Setenv(EnvDSN, want)
	shared.mu.Lock()
	before := shared.done // an earlier test (or -count run) may have started it
	shared.mu.Unlock()
	if got := DSN(t); got != want {
		t.Errorf("DSN() = %q, want %q", got, want)
	}
	shared.mu.Lock()
	started := shared.done && !before
	shared.mu.Unlock()
	if started {
		t.Error("DSN started a server although PGTEST_DSN was set")
	}
}

func TestDSNShared(t *testing.T) {
	requireBinaries(t)
	t.Setenv(EnvDSN, "")
	ctx := testContext(t)
	a, b := DSN(t), DSN(t)
	if a != b {
		t.Errorf("DSN() = %q then %q; want the same shared server", a, b)
	}
	selectOne(ctx, t, a)
}

// fakeTB records how failStart ended a test. Skip and Fatal return instead
// of stopping the goroutine.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skip(args ...any) {
	f.skipped, f.msg = true, fmt.Sprint(args...)
}
func (f *fakeTB) Fatal(args ...any) {
	f.failed, f.msg = true, fmt.Sprint(args...)
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
}

func TestFailStart(t *testing.T) {
	tests := []struct {
		name        string
		require     string
		err         error
		wantSkip    bool
		wantMessage string
	}{
		{name: "binaries missing", err: ErrNotFound, wantSkip: true, wantMessage: "install postgresql or set PGTEST_DSN"},
		{name: "binaries missing, required", require: "1", err: ErrNotFound, wantMessage: "install postgresql or set PGTEST_DSN"},
		{name: "start failed", err: &StartError{Step: "initdb", Err: errors.New("boom")}, wantMessage: "boom"},
		{name: "start failed, required", require: "1", err: &StartError{Step: "initdb", Err: errors.New("boom")}, wantMessage: "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvRequire, tt.require)
			var f fakeTB
			failStart(&f, tt.err)
			if f.skipped != tt.wantSkip || f.failed == tt.wantSkip {
				t.Errorf("skipped=%v failed=%v, want skipped=%v", f.skipped, f.failed, tt.wantSkip)
			}
			if !strings.Contains(f.msg, tt.wantMessage) {
				t.Errorf("message %q lacks %q", f.msg, tt.wantMessage)
			}
		})
	}
}

func TestBinDirFallback(t *testing.T) {
	dirs := debianBinDirs()
	if len(dirs) == 0 || !hasServerBinaries(dirs[0]) {
		t.Skip("no /usr/lib/postgresql/*/bin to fall back to")
	}
	t.Setenv("PATH", "") // neither initdb nor pg_config can be found
	got, err := BinDir()
	if err != nil || got != dirs[0] {
		t.Errorf("BinDir() = %q, %v; want %q", got, err, dirs[0])
	}
}

func TestBinDir(t *testing.T) {
	t.Parallel()
	requireBinaries(t)
	dir, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil || !strings.Contains(string(out), "PostgreSQL") {
		t.Errorf("%s/postgres --version = %q, %v", dir, out, err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestKillPostmaster checks the fallback used when pg_ctl cannot stop a
// server: it kills the pid in postmaster.pid only if that process runs in
// the data directory, so a reused pid is left alone.
func TestKillPostmaster(t *testing.T) {
	if _, err := os.Stat("/proc/self/cwd"); err != nil {
		t.Skip("needs /proc")
	}
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("needs sleep")
	}
	tests := []struct {
		name     string
		sameDir  bool
		wantKill bool
	}{
		{name: "process in the data directory", sameDir: true, wantKill: true},
		{name: "unrelated process with the pid", sameDir: false, wantKill: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dataDir, otherDir := t.TempDir(), t.TempDir()
			cmd := exec.Command("sleep", "60")
			cmd.Dir = otherDir
			if tt.sameDir {
				cmd.Dir = dataDir
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			defer func() {
				_ = cmd.Process.Kill()
				<-waited
			}()

			pidFile := filepath.Join(dataDir, "postmaster.pid")
			if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"+dataDir+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			killPostmaster(pidFile, dataDir)
			if got := !alive(cmd.Process.Pid); got != tt.wantKill {
				t.Errorf("killed = %v, want %v", got, tt.wantKill)
			}
		})
	}
}
