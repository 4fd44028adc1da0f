package failovertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/pgurl"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5"
)

// node is one PostgreSQL server of the cluster: a data directory at a fixed
// address. Its role changes; its address and server id do not.
type node struct {
	id string // server_id, "orders-1"
	// resourceID is its dbi resource id (rds_tools.dbi_resource_id()),
	// "db-" and 26 characters.
	resourceID string
	host       string
	port       int
	dir        string // owned by the server's OS user; holds data/ and server.log
	bin        string
	cred       *syscall.Credential // run as this user (root runs as postgres)
	pg         *pgtest.Server      // the first writer, started by pgtest; nil for the others
	cert       *serverCert         // with Config.TLS: installed in data/, ssl on
	// Guarded by Cluster.mu: a reader crashed or hung by the test (still
	// in the topology), and the apply delay of a lagging reader (SetLag).
	crashed, hung bool
	lag           time.Duration
}

func (n *node) addr() string { return net.JoinHostPort(n.host, strconv.Itoa(n.port)) }
func (n *node) data() string { return filepath.Join(n.dir, "data") }

func (n *node) dsn() string {
	return pgurl.Superuser(n.addr(), "postgres", "sslmode=disable&connect_timeout=5")
}

// settings are the postgresql.conf settings of a node. syncStandby makes
// every commit wait until a standby has flushed it (the cluster's writer
// with a standby attached); a writer alone must not wait, or its commits
// would hang.
func (n *node) settings(syncStandby bool) map[string]string {
	sync := ""
	if syncStandby {
		sync = "ANY 1 (*)" // a commit waits for one standby's flush, any
	}
	s := map[string]string{
		"fsync":             "off",
		"full_page_writes":  "off",
		"max_connections":   "100",
		"shared_buffers":    "32MB",
		"logging_collector": "off",
		"huge_pages":        "off",
		"wal_level":         "replica",
		"max_wal_senders":   "32", // two per pg_basebackup -X stream, made in parallel, and one per standby
		// pg_basebackup -X stream makes its temporary slot only once the
		// backup started: meanwhile the checkpoint of another backup made
		// in parallel could remove the WAL it needs ("requested WAL
		// segment … has already been removed"). A small cluster's WAL is
		// kept instead.
		"wal_keep_size":                "256MB",
		"hot_standby":                  "on",
		"synchronous_commit":           "on",
		"synchronous_standby_names":    sync,
		"wal_receiver_status_interval": "1s",
		"wal_retrieve_retry_interval":  "100ms", // a standby reconnects soon after a failover
		"holdfast.server_id":           n.id,
		"holdfast.dbi_resource_id":     n.resourceID,
	}
	if n.lag > 0 {
		// A lagging reader (Cluster.SetLag): it receives and flushes WAL at
		// once, so it still acknowledges commits, and applies each commit
		// lag after the writer made it; a promotion applies the rest at
		// once.
		s["recovery_min_apply_delay"] = strconv.FormatInt(n.lag.Milliseconds(), 10) + "ms"
	}
	return s
}

// writeConf writes data/holdfast.conf (pgtest includes it at the end of
// postgresql.conf; pg_basebackup copies both), with TLS on when the node
// has a certificate (installCert must have written it).
func (n *node) writeConf(syncStandby bool) error {
	var b strings.Builder
	b.WriteString("# written by holdfast failovertest\n")
	fmt.Fprintf(&b, "listen_addresses = %s\nport = %d\nunix_socket_directories = %s\n",
		pgtest.QuoteConf(n.host), n.port, pgtest.QuoteConf(n.dir))
	s := n.settings(syncStandby)
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, pgtest.QuoteConf(s[k]))
	}
	if n.cert != nil {
		// Here rather than in postgresql.auto.conf (ALTER SYSTEM), which
		// pg_basebackup copies and which would override this file.
		fmt.Fprintf(&b, "ssl = on\nssl_cert_file = %s\nssl_key_file = %s\n",
			pgtest.QuoteConf(certFile), pgtest.QuoteConf(keyFile))
	}
	name := filepath.Join(n.data(), "holdfast.conf")
	if err := os.WriteFile(name, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return n.chown(name)
}

// setSync rewrites the node's configuration and reloads it.
func (n *node) setSync(ctx context.Context, syncStandby bool) error {
	if err := n.writeConf(syncStandby); err != nil {
		return err
	}
	return n.exec(ctx, "SELECT pg_reload_conf()")
}

func (n *node) chown(name string) error {
	if n.cred == nil {
		return nil
	}
	return os.Chown(name, int(n.cred.Uid), int(n.cred.Gid))
}

// command runs a PostgreSQL program as the server's OS user, without PG*
// variables that could redirect it.
func (n *node) command(ctx context.Context, prog string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(n.bin, prog), args...)
	env := []string{"LC_ALL=C", "TZ=UTC", "HOME=/tmp"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "LC_") || k == "LANG" || k == "TZ" || k == "HOME" {
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = env
	cmd.Dir = "/"
	if n.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: n.cred}
	}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w\n%s%s", prog, strings.Join(args, " "), err, tail(out), n.logTail())
	}
	return out, nil
}

func (n *node) logTail() string {
	b, err := os.ReadFile(filepath.Join(n.dir, "server.log"))
	if err != nil {
		return ""
	}
	return "--- server log ---\n" + tail(b)
}

func tail(b []byte) string {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return string(bytes.Join(lines, []byte("\n"))) + "\n"
}

func (n *node) pgctl(ctx context.Context, args ...string) error {
	_, err := n.command(ctx, "pg_ctl", append([]string{"-D", n.data(), "-w", "-t", "60"}, args...)...)
	return err
}

func (n *node) start(ctx context.Context) error {
	return n.pgctl(ctx, "-l", filepath.Join(n.dir, "server.log"), "start")
}

// stop stops the server: mode "immediate" is a crash (no checkpoint, no
// goodbye to clients), "fast" a clean shutdown.
func (n *node) stop(ctx context.Context, mode string) error {
	return n.pgctl(ctx, "-m", mode, "stop")
}

func (n *node) promote(ctx context.Context) error { return n.pgctl(ctx, "promote") }

// basebackup makes the node a fresh standby of from: its data directory is
// replaced by a copy of from's (pg_basebackup, WAL streamed), with
// standby.signal and primary_conninfo (-R), then started.
func (n *node) basebackup(ctx context.Context, from *node) error {
	if err := os.RemoveAll(n.data()); err != nil {
		return err
	}
	if _, err := n.command(ctx, "pg_basebackup", "-h", from.host, "-p", strconv.Itoa(from.port),
		"-U", "postgres", "-D", n.data(), "-X", "stream", "-R", "-c", "fast", "--no-sync"); err != nil {
		return err
	}
	// The copy carries from's holdfast.conf (its address) and
	// postmaster.opts; the node keeps its own address. It carries from's
	// certificate too, the same one; it is installed again all the same.
	if err := n.installCert(); err != nil {
		return err
	}
	if err := n.writeConf(false); err != nil {
		return err
	}
	return n.start(ctx)
}

// follow points the standby n at writer w: primary_conninfo, which
// pg_basebackup -R wrote in postgresql.auto.conf, is rewritten and
// reloaded; the standby's WAL receiver reconnects and follows the new
// timeline (recovery_target_timeline is latest by default).
func (n *node) follow(ctx context.Context, w *node) error {
	name := filepath.Join(n.data(), "postgresql.auto.conf")
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	var out []string
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "primary_conninfo") {
			out = append(out, line)
		}
	}
	out = append(out, "primary_conninfo = "+pgtest.QuoteConf(fmt.Sprintf("host=%s port=%d user=postgres application_name=%s", w.host, w.port, n.id)))
	if err := os.WriteFile(name, []byte(strings.Join(out, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	if err := n.chown(name); err != nil {
		return err
	}
	return n.exec(ctx, "SELECT pg_reload_conf()")
}

// received returns how far the standby n has received WAL (an LSN).
func (n *node) received(ctx context.Context) (uint64, error) {
	conn, err := pgx.Connect(ctx, n.dsn())
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var lsn uint64
	err = conn.QueryRow(ctx, "SELECT coalesce(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) - '0/0'::pg_lsn").Scan(&lsn)
	return lsn, err
}

// exec runs sql on the node as the superuser.
func (n *node) exec(ctx context.Context, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, n.dsn())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// postmaster returns the pid in postmaster.pid.
func (n *node) postmaster() (int, error) {
	b, err := os.ReadFile(filepath.Join(n.data(), "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return strconv.Atoi(strings.TrimSpace(string(line)))
}

// processes returns the postmaster's pid and its children's (backends,
// walsenders, background workers), read from /proc (Linux only).
func (n *node) processes() ([]int, error) {
	pm, err := n.postmaster()
	if err != nil {
		return nil, err
	}
	if pm <= 0 { // kill(0) or kill(-1) would signal far more than the server
		return nil, fmt.Errorf("%s: postmaster pid %d", n.id, pm)
	}
	pids := []int{pm}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pm) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// signal sends sig to the postmaster first, then to its children, so that
// with SIGSTOP no new child is forked meanwhile.
func (n *node) signal(sig syscall.Signal) error {
	pids, err := n.processes()
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pids {
		if err := syscall.Kill(p, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// remove stops the server if it still runs and removes its directory.
func (n *node) remove() error {
	_ = n.signal(syscall.SIGCONT) // a hung server would not see the stop
	if n.pg != nil {
		return n.pg.Stop() // stops whatever postmaster runs on the directory
	}
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	if _, err := os.Stat(filepath.Join(n.data(), "postmaster.pid")); err == nil {
		_ = n.stop(ctx, "immediate")
	}
	return os.RemoveAll(n.dir)
}
