// Package pgnode is one PostgreSQL server of the fakes that play
// replicated clusters (fakes/failovertest, fakes/outagetest): a data
// directory at a fixed address whose role changes (primary, streaming
// standby), run with pg_ctl as the server's OS user, and the waits its
// simulations are made of (streaming in sync, writable after a
// promotion, replayed up to a position, TLS on).
package pgnode

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
	"sync"
	"syscall"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/pgurl"
	"github.com/holdfast-db/holdfast/fakes/internal/ports"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/pause"
	"github.com/jackc/pgx/v5"
)

// Node is one PostgreSQL server: a data directory at a fixed address. Its
// role changes; its address and id do not. The fields are set before its
// server starts and not changed after, but for Port and Dir, which
// [Node.StartPrimary] and [MakeStandby] set.
type Node struct {
	ID   string // its name in the simulation, "orders-1"
	Host string
	Port int
	Dir  string // owned by the server's OS user; holds data/ and server.log
	Bin  string // the directory of the PostgreSQL programs (pgtest.BinDir)
	Cred *syscall.Credential
	PG   *pgtest.Server // the first primary, started by pgtest; nil for the others
	Cert *Cert          // with TLS: installed in data/, ssl on
	// Conninfo is added to the primary_conninfo of the standbys that
	// follow the node (" sslmode=disable", with its space), empty for
	// libpq's defaults.
	Conninfo string
	// Conf returns the settings of the node's own configuration file
	// ([Settings] and the simulation's own); syncStandby makes a primary
	// wait for a standby's flush at each commit.
	Conf func(syncStandby bool) map[string]string
}

// Cert is the certificate a server presents and its key, PEM.
type Cert struct {
	CertPEM, KeyPEM []byte
}

// The files of the certificate and its key in a server's data directory,
// where ssl_cert_file and ssl_key_file find them (relative paths are read
// from the data directory).
const (
	certFile = "server.crt"
	keyFile  = "server.key"
)

// Settings are the postgresql.conf settings every node shares: fast
// rather than durable, physical replication with room for parallel base
// backups, a readable standby (hot_standby on) that reconnects soon after
// a failover. syncStandby makes every commit wait until a standby has
// flushed it (a primary with a standby attached); a primary alone must not
// wait, or its commits would hang.
func Settings(syncStandby bool) map[string]string {
	sync := ""
	if syncStandby {
		sync = "ANY 1 (*)" // a commit waits for one standby's flush, any
	}
	return map[string]string{
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
	}
}

// Addr returns where the server listens, "ip:port".
func (n *Node) Addr() string { return net.JoinHostPort(n.Host, strconv.Itoa(n.Port)) }

// Data returns the data directory.
func (n *Node) Data() string { return filepath.Join(n.Dir, "data") }

// DSN is the superuser's connection string to the server's address,
// without TLS.
func (n *Node) DSN() string {
	return pgurl.Superuser(n.Addr(), "postgres", "sslmode=disable&connect_timeout=5")
}

// WriteConf writes data/holdfast.conf (pgtest includes it at the end of
// postgresql.conf; pg_basebackup copies both): the node's address and
// n.Conf(syncStandby), with TLS on when the node has a certificate
// (InstallCert must have written it).
func (n *Node) WriteConf(syncStandby bool) error {
	var b strings.Builder
	b.WriteString("# written by holdfast's fakes\n")
	fmt.Fprintf(&b, "listen_addresses = %s\nport = %d\nunix_socket_directories = %s\n",
		pgtest.QuoteConf(n.Host), n.Port, pgtest.QuoteConf(n.Dir))
	s := n.Conf(syncStandby)
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, pgtest.QuoteConf(s[k]))
	}
	if n.Cert != nil {
		// Here rather than in postgresql.auto.conf (ALTER SYSTEM), which
		// pg_basebackup copies and which would override this file.
		fmt.Fprintf(&b, "ssl = on\nssl_cert_file = %s\nssl_key_file = %s\n",
			pgtest.QuoteConf(certFile), pgtest.QuoteConf(keyFile))
	}
	name := filepath.Join(n.Data(), "holdfast.conf")
	if err := os.WriteFile(name, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return n.Chown(name)
}

// SetSync rewrites the node's configuration and reloads it.
func (n *Node) SetSync(ctx context.Context, syncStandby bool) error {
	if err := n.WriteConf(syncStandby); err != nil {
		return err
	}
	return n.Exec(ctx, "SELECT pg_reload_conf()")
}

// Chown gives name to the server's OS user (nothing when the process is
// not root).
func (n *Node) Chown(name string) error {
	if n.Cred == nil {
		return nil
	}
	return os.Chown(name, int(n.Cred.Uid), int(n.Cred.Gid))
}

// Command runs a PostgreSQL program as the server's OS user, without PG*
// variables that could redirect it. Its error carries the tail of the
// program's output and of the server log.
func (n *Node) Command(ctx context.Context, prog string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(n.Bin, prog), args...)
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
	if n.Cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: n.Cred}
	}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w\n%s%s", prog, strings.Join(args, " "), err, tail(out), n.logTail())
	}
	return out, nil
}

func (n *Node) logTail() string {
	b, err := os.ReadFile(filepath.Join(n.Dir, "server.log"))
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

func (n *Node) pgctl(ctx context.Context, args ...string) error {
	_, err := n.Command(ctx, "pg_ctl", append([]string{"-D", n.Data(), "-w", "-t", "60"}, args...)...)
	return err
}

// Start starts the server on its data directory and returns once it
// accepts connections (or, as a standby without hot_standby, once it
// runs).
func (n *Node) Start(ctx context.Context) error {
	return n.pgctl(ctx, "-l", filepath.Join(n.Dir, "server.log"), "start")
}

// Stop stops the server: mode "immediate" is a crash (no checkpoint, no
// goodbye to clients), "fast" a clean shutdown (its clients get 57P01).
func (n *Node) Stop(ctx context.Context, mode string) error {
	return n.pgctl(ctx, "-m", mode, "stop")
}

// Promote promotes a standby (pg_ctl promote, waiting for its end).
func (n *Node) Promote(ctx context.Context) error { return n.pgctl(ctx, "promote") }

// StartPrimary makes and starts the first primary: pgtest's initdb and
// start on n.Host, then the node's configuration (with TLS, once the
// certificate is in its data directory), and trust for replication from
// any loopback address. With a certificate it returns once TLS is on.
func (n *Node) StartPrimary(ctx context.Context) error {
	var err error
	n.PG, err = pgtest.Start(ctx, pgtest.Options{Host: n.Host, Settings: n.Conf(false)})
	if err != nil {
		return err
	}
	n.Port, n.Dir = n.PG.Port, n.PG.Dir
	if err := n.InstallCert(); err != nil {
		return err
	}
	if err := n.WriteConf(false); err != nil {
		return err
	}
	if err := n.PG.PrependHBA(ctx, "host all all 127.0.0.0/8 trust\nhost replication all 127.0.0.0/8 trust\n"); err != nil {
		return err
	}
	if n.Cert != nil {
		return WaitTLS(ctx, n)
	}
	return nil
}

// MakeStandby gives r a directory of its own, owned by the server's user
// (under /tmp when the process is root, which the server's user could not
// reach in a test's directory), and a free port, and makes it a standby
// of w ([Node.Basebackup]).
func MakeStandby(ctx context.Context, r, w *Node) error {
	parent := ""
	if r.Cred != nil {
		parent = "/tmp"
	}
	var err error
	if r.Dir, err = os.MkdirTemp(parent, "holdfast-failover-*"); err != nil {
		return err
	}
	if err := r.Chown(r.Dir); err != nil {
		return err
	}
	if r.Port, err = ports.Free(r.Host); err != nil {
		return err
	}
	return r.Basebackup(ctx, w)
}

// Basebackup makes the node a fresh standby of from: its data directory
// is replaced by a copy of from's (pg_basebackup, WAL streamed), with
// standby.signal and primary_conninfo (-R), then started.
func (n *Node) Basebackup(ctx context.Context, from *Node) error {
	if err := os.RemoveAll(n.Data()); err != nil {
		return err
	}
	if _, err := n.Command(ctx, "pg_basebackup", "-h", from.Host, "-p", strconv.Itoa(from.Port),
		"-U", "postgres", "-D", n.Data(), "-X", "stream", "-R", "-c", "fast", "--no-sync"); err != nil {
		return err
	}
	// The copy carries from's holdfast.conf (its address) and
	// postmaster.opts; the node keeps its own address. It carries from's
	// certificate too, the same one; it is installed again all the same.
	if err := n.InstallCert(); err != nil {
		return err
	}
	if err := n.WriteConf(false); err != nil {
		return err
	}
	return n.Start(ctx)
}

// Follow points the standby n at primary w: primary_conninfo, which
// pg_basebackup -R wrote in postgresql.auto.conf, is rewritten. A running
// n reloads it: its WAL receiver reconnects and follows the new timeline
// (recovery_target_timeline is latest by default). A stopped one
// (reload false) reads it when it starts.
func (n *Node) Follow(ctx context.Context, w *Node, reload bool) error {
	name := filepath.Join(n.Data(), "postgresql.auto.conf")
	b, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var out []string
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line != "" && !strings.HasPrefix(strings.TrimSpace(line), "primary_conninfo") {
			out = append(out, line)
		}
	}
	out = append(out, "primary_conninfo = "+pgtest.QuoteConf(fmt.Sprintf("host=%s port=%d user=postgres application_name=%s%s", w.Host, w.Port, n.ID, w.Conninfo)))
	if err := os.WriteFile(name, []byte(strings.Join(out, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	if err := n.Chown(name); err != nil {
		return err
	}
	if !reload {
		return nil
	}
	return n.Exec(ctx, "SELECT pg_reload_conf()")
}

// StartStandby starts n, a server that was shut down cleanly (fast), as a
// standby of upstream: standby.signal, primary_conninfo naming upstream,
// its own configuration. It follows upstream's timeline without a rewind
// when its last WAL (the shutdown checkpoint) reached upstream before a
// promotion, as a fast shutdown makes sure by waiting for its walsenders
// to send it (pg_rewind would need full_page_writes, which the servers
// turn off for speed).
func (n *Node) StartStandby(ctx context.Context, upstream *Node) error {
	signal := filepath.Join(n.Data(), "standby.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		return err
	}
	if err := n.Chown(signal); err != nil {
		return err
	}
	if err := n.Follow(ctx, upstream, false); err != nil {
		return err
	}
	if err := n.WriteConf(false); err != nil {
		return err
	}
	return n.Start(ctx)
}

// Received returns how far the standby n has received WAL (an LSN).
func (n *Node) Received(ctx context.Context) (uint64, error) {
	var lsn uint64
	err := n.QueryRow(ctx, "SELECT coalesce(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) - '0/0'::pg_lsn", &lsn)
	return lsn, err
}

// Exec runs sql on the node as the superuser.
func (n *Node) Exec(ctx context.Context, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// QueryRow runs sql on the node as the superuser and scans its one row
// into dst.
func (n *Node) QueryRow(ctx context.Context, sql string, dst ...any) error {
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dst...)
}

// IDs returns the ids in column id of table (in database postgres) on the
// node, sorted: the audit of acknowledged writes after a failover. table
// is an SQL identifier, used as given. Its error names the node.
func (n *Node) IDs(ctx context.Context, table string) ([]int64, error) {
	ids, err := n.ids(ctx, table)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.ID, err)
	}
	return ids, nil
}

// RecoveredIDs returns the ids in column id of table on n, a server that
// is down (crashed or stopped), sorted: it starts it with no TCP listener,
// only its Unix socket in n.Dir, so that no client reaches it (a crashed
// server recovers first: what it wrote is there), reads them and stops it
// again. It is the audit of what a lost server had committed.
func (n *Node) RecoveredIDs(ctx context.Context, table string) ([]int64, error) {
	if err := n.pgctl(ctx, "-l", filepath.Join(n.Dir, "server.log"), "-o", "-c listen_addresses=''", "start"); err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable connect_timeout=5", n.Dir, n.Port)
	ids, err := idsAt(ctx, dsn, table)
	if err != nil {
		err = fmt.Errorf("%s: %w", n.ID, err)
	}
	return ids, errors.Join(err, n.Stop(ctx, "fast"))
}

func (n *Node) ids(ctx context.Context, table string) ([]int64, error) {
	return idsAt(ctx, n.DSN(), table)
}

func idsAt(ctx context.Context, dsn, table string) ([]int64, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT id::bigint FROM "+table+" ORDER BY id")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// postmaster returns the pid in postmaster.pid.
func (n *Node) postmaster() (int, error) {
	b, err := os.ReadFile(filepath.Join(n.Data(), "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return strconv.Atoi(strings.TrimSpace(string(line)))
}

// processes returns the postmaster's pid and its children's (backends,
// walsenders, background workers), read from /proc (Linux only).
func (n *Node) processes() ([]int, error) {
	pm, err := n.postmaster()
	if err != nil {
		return nil, err
	}
	if pm <= 0 { // kill(0) or kill(-1) would signal far more than the server
		return nil, fmt.Errorf("%s: postmaster pid %d", n.ID, pm)
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

// Signal sends sig to the postmaster first, then to its children, so that
// with SIGSTOP no new child is forked meanwhile.
func (n *Node) Signal(sig syscall.Signal) error {
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

// Remove stops the server if it still runs (resumed first, in case it
// was stopped with SIGSTOP) and removes its directory.
func (n *Node) Remove() error {
	_ = n.Signal(syscall.SIGCONT) // a hung server would not see the stop
	if n.PG != nil {
		return n.PG.Stop() // stops whatever postmaster runs on the directory
	}
	if n.Dir == "" {
		return nil // never made
	}
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	if _, err := os.Stat(filepath.Join(n.Data(), "postmaster.pid")); err == nil {
		_ = n.Stop(ctx, "immediate")
	}
	return os.RemoveAll(n.Dir)
}

// RemoveAll removes the nodes ([Node.Remove]), in parallel.
func RemoveAll(nodes []*Node) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.Remove() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// InstallCert writes the certificate and its key into the node's data
// directory (nothing without one). The server runs as the owner of the
// files it reads and refuses a key file that others can read: both are
// given to the server's OS user, the key with mode 0600. pg_basebackup
// copies the two files to a standby with the rest of the data directory;
// they are written again all the same, so that a standby does not depend
// on it.
func (n *Node) InstallCert() error {
	if n.Cert == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{certFile, n.Cert.CertPEM, 0o644}, {keyFile, n.Cert.KeyPEM, 0o600}} {
		name := filepath.Join(n.Data(), f.name)
		if err := os.WriteFile(name, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(name, f.mode); err != nil { // an existing file keeps its mode through WriteFile
			return err
		}
		if err := n.Chown(name); err != nil {
			return err
		}
	}
	return nil
}

// WaitTLS waits until a new connection to n gets TLS (pg_stat_ssl): a
// configuration reload is asynchronous.
func WaitTLS(ctx context.Context, n *Node) error {
	dsn := pgurl.Superuser(n.Addr(), "postgres", "sslmode=require&connect_timeout=5")
	var last error
	err := Poll(ctx, func() (bool, error) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			last = err
			return false, nil
		}
		defer conn.Close(context.Background())
		var on bool
		if err := conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&on); err != nil {
			last = err
			return false, nil
		}
		return on, nil
	})
	if err != nil {
		return fmt.Errorf("%s: TLS not on: %w", n.ID, errors.Join(err, last))
	}
	return nil
}

// WaitReplayed waits until the standby n has replayed WAL up to lsn.
func WaitReplayed(ctx context.Context, n *Node, lsn string) error {
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return Poll(ctx, func() (bool, error) {
		var done bool
		err := conn.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done)
		return done, err
	})
}

// WaitSync waits until w streams to n standbys, each a synchronous
// candidate.
func WaitSync(ctx context.Context, w *Node, n int) error {
	return waitStreams(ctx, w, n, "sync_state IN ('sync', 'quorum')")
}

// WaitStreaming waits until w streams WAL to each of the standbys ids
// (their application_name), synchronous or not: w may be a primary or a
// standby that cascades.
func WaitStreaming(ctx context.Context, w *Node, ids ...string) error {
	return waitStreams(ctx, w, len(ids), "application_name = ANY($1)", ids)
}

// waitStreams waits until w streams to n standbys whose rows of
// pg_stat_replication match where (with args).
func waitStreams(ctx context.Context, w *Node, n int, where string, args ...any) error {
	return Poll(ctx, func() (bool, error) {
		conn, err := pgx.Connect(ctx, w.DSN())
		if err != nil {
			return false, nil
		}
		defer conn.Close(context.Background())
		var got int
		err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND "+where, args...).Scan(&got)
		return err == nil && got >= n, nil
	})
}

// WaitWritable waits until n takes writes: out of recovery, after a
// promotion.
func WaitWritable(ctx context.Context, n *Node) error {
	return Poll(ctx, func() (bool, error) {
		err := n.Exec(ctx, "DO $$ BEGIN IF pg_is_in_recovery() THEN RAISE EXCEPTION 'in recovery'; END IF; END $$")
		return err == nil, nil
	})
}

// Poll calls done every 20 ms until it reports true or an error, for 30 s
// at most, or until ctx ends (then it returns ctx's cause).
func Poll(ctx context.Context, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Sleep waits for d, or until ctx is done: then it returns ctx's cause.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if !pause.For(ctx, d, nil) {
		return context.Cause(ctx)
	}
	return nil
}

// CanBind reports (nil) whether a listener can be bound on host.
func CanBind(host string) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return err
	}
	return l.Close()
}
