package failovertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
	"github.com/jackc/pgx/v5"
)

// ErrTooManyReaders is matched (errors.Is) by the error of
// [Cluster.AddReader] when the cluster has MaxReplicas readers already.
var ErrTooManyReaders = errors.New("fakes/failovertest: MaxReplicas readers already")

// Readers returns the server ids of the readers in the topology, in the
// order of [Cluster.ServerIDs]: every server but the writer, a reader that
// crashed or hung too (Aurora lists it until it is detected, and the
// simulator plays no detection), an old writer that is down after a
// failover without Rejoin too.
func (c *Cluster) Readers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.nodes {
		if n != c.writer {
			out = append(out, n.ID)
		}
	}
	return out
}

// AddReader adds a reader, as Aurora auto scaling or the console adds one:
// a new server (the next id, "orders-4" after "orders-3", at the next
// address of [DefaultHost]'s scheme, or 127.0.0.1 and a port of its own)
// made by pg_basebackup from the current writer, a synchronous standby
// like the others. It returns once the standby streams, the topology
// lists it on every server (it has replayed the change) and the DNS has
// its instance endpoint and has it behind the reader endpoint. With
// Config.TLS the new server presents a certificate of its own, from the
// same CA, naming the endpoints and every instance endpoint so far.
func (c *Cluster) AddReader(ctx context.Context) (string, error) {
	c.failing.Lock()
	defer c.failing.Unlock()
	id, err := c.addReader(ctx)
	if err != nil {
		return id, fmt.Errorf("fakes/failovertest: AddReader: %w", err)
	}
	return id, nil
}

func (c *Cluster) addReader(ctx context.Context) (string, error) {
	c.mu.Lock()
	readers := 0
	for _, n := range c.nodes {
		if n != c.writer {
			readers++
		}
	}
	if readers >= MaxReplicas {
		c.mu.Unlock()
		return "", ErrTooManyReaders
	}
	i := c.next
	c.next++
	w := c.writer
	ids := make([]string, 0, len(c.nodes)+1)
	for _, n := range c.nodes {
		ids = append(ids, n.ID)
	}
	c.mu.Unlock()

	host := "127.0.0.1"
	if !c.SingleIP {
		h := DefaultHost(i)
		if i-1 < len(c.cfg.ReplicaHosts) {
			h = c.cfg.ReplicaHosts[i-1]
		}
		if pgnode.CanBind(h) == nil {
			host = h
		}
	}
	n := newNode(fmt.Sprintf("%s-%d", c.cfg.Name, i+1), resourceID(c.cfg, i), host, w.Bin, w.Cred)
	if c.ca != nil {
		names := []string{c.ClusterEndpoint, c.ReaderEndpoint}
		for _, id := range append(ids, n.ID) {
			names = append(names, c.InstanceEndpoint(id))
		}
		certPEM, keyPEM, err := c.ca.Issue(c.InstanceEndpoint(n.ID), names)
		if err != nil {
			return "", fmt.Errorf("TLS certificate: %w", err)
		}
		n.Cert = &pgnode.Cert{CertPEM: certPEM, KeyPEM: keyPEM}
	}
	if err := pgnode.MakeStandby(ctx, n.Node, w.Node); err != nil {
		return n.ID, errors.Join(err, n.Remove())
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.standbys = append(c.standbys, n)
	standbys := append([]*node(nil), c.standbys...)
	c.mu.Unlock()
	if err := w.SetSync(ctx, true); err != nil {
		return n.ID, err
	}
	if err := pgnode.WaitSync(ctx, w.Node, len(standbys)); err != nil {
		return n.ID, err
	}
	if err := c.publishTopology(ctx); err != nil {
		return n.ID, err
	}
	c.Resolver.Set(c.InstanceEndpoint(n.ID), n.Addr())
	c.setDNS(w, standbys)
	return n.ID, nil
}

// readerLocked returns the node of reader id, with c.mu held.
func (c *Cluster) readerLocked(id string) (*node, error) {
	for _, n := range c.nodes {
		if n.ID == id {
			if n == c.writer {
				return nil, fmt.Errorf("%s is the writer", id)
			}
			return n, nil
		}
	}
	return nil, fmt.Errorf("no server %q", id)
}

// dropStandbyLocked takes n out of the streaming standbys (c.mu held) and
// returns the writer and the standbys left.
func (c *Cluster) dropStandbyLocked(n *node) (*node, []*node) {
	c.standbys = slices.DeleteFunc(c.standbys, func(s *node) bool { return s == n })
	return c.writer, append([]*node(nil), c.standbys...)
}

// RemoveReader removes reader id, as deleting an Aurora instance does: it
// leaves the topology (every running server has replayed the change), its
// address leaves the reader endpoint and its instance endpoint the DNS,
// then it is stopped (fast shutdown: its clients get 57P01) and its
// directory removed. A reader that crashed or hung can be removed too.
// When it was the last standby, the writer stops waiting for one.
func (c *Cluster) RemoveReader(ctx context.Context, id string) error {
	return c.onReader("RemoveReader", id, func() error { return c.removeReader(ctx, id) })
}

// onReader runs op, a change of reader id, while no failover or other
// change runs (c.failing); its error names the method and the reader.
func (c *Cluster) onReader(method, id string, op func() error) error {
	c.failing.Lock()
	defer c.failing.Unlock()
	if err := op(); err != nil {
		return fmt.Errorf("fakes/failovertest: %s %s: %w", method, id, err)
	}
	return nil
}

func (c *Cluster) removeReader(ctx context.Context, id string) error {
	c.mu.Lock()
	n, err := c.readerLocked(id)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	c.nodes = slices.DeleteFunc(c.nodes, func(s *node) bool { return s == n })
	w, standbys := c.dropStandbyLocked(n)
	c.mu.Unlock()
	var errs []error
	if len(standbys) == 0 {
		errs = append(errs, w.SetSync(ctx, false))
	}
	if err := c.publishTopology(ctx); err != nil {
		errs = append(errs, err)
	}
	c.setDNS(w, standbys)
	c.Resolver.Remove(c.InstanceEndpoint(n.ID))
	// Out of c.nodes, Close would not stop it: it is stopped and removed
	// whatever failed above.
	if err := n.resume(); err != nil {
		errs = append(errs, err)
	}
	if !n.crashed {
		errs = append(errs, n.Stop(ctx, "fast"))
	}
	errs = append(errs, n.Remove())
	return errors.Join(errs...)
}

// CrashReader kills reader id (pg_ctl stop -m immediate: its clients'
// connections reset, new ones refused). As on Aurora before the failure
// is detected, it stays in the topology — its row in
// aurora_replica_status() (or show_topology()) unchanged: same session
// id, same last_update_timestamp and lag, every row's timestamp being
// the time of the simulator's last change — and behind the reader
// endpoint, so that lookups keep answering it; only [Cluster.RemoveReader]
// takes it out. It is no longer a standby: topology changes do not wait
// for it, and when it was the last one the writer stops waiting for a
// standby (a failover then has none to promote).
func (c *Cluster) CrashReader(ctx context.Context, id string) error {
	return c.onReader("CrashReader", id, func() error { return c.downReader(ctx, id, false) })
}

// HangReader stops reader id's postmaster and backends (SIGSTOP, to the
// processes of its postmaster.pid and their children only): its
// connections stay open and silent, new connections hang after the TCP
// handshake. The topology and DNS keep it, as with [Cluster.CrashReader];
// it is no longer a standby. Close (or RemoveReader) resumes it
// (SIGCONT) before stopping it.
func (c *Cluster) HangReader(ctx context.Context, id string) error {
	return c.onReader("HangReader", id, func() error { return c.downReader(ctx, id, true) })
}

func (c *Cluster) downReader(ctx context.Context, id string, hang bool) error {
	c.mu.Lock()
	n, err := c.readerLocked(id)
	if err == nil && (n.crashed || n.hung) {
		err = fmt.Errorf("%s is down already", id)
	}
	if err == nil && !slices.Contains(c.standbys, n) {
		err = fmt.Errorf("%s is not a running standby", id)
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	w, standbys := c.dropStandbyLocked(n)
	if hang {
		n.hung = true
	} else {
		n.crashed = true
	}
	c.mu.Unlock()
	if hang {
		err = n.Signal(syscall.SIGSTOP)
	} else {
		err = n.Stop(ctx, "immediate")
	}
	if err != nil {
		return err
	}
	if len(standbys) == 0 {
		return w.SetSync(ctx, false)
	}
	return nil
}

// RecoverReader brings back reader id after [Cluster.CrashReader] (it
// starts again) or [Cluster.HangReader] (SIGCONT), as Aurora restarts a
// failed reader: it streams from the current writer again, a synchronous
// candidate as before, and returns once the writer streams to it. It was
// in the topology and behind the reader endpoint all along.
func (c *Cluster) RecoverReader(ctx context.Context, id string) error {
	return c.onReader("RecoverReader", id, func() error { return c.recoverReader(ctx, id) })
}

func (c *Cluster) recoverReader(ctx context.Context, id string) error {
	c.mu.Lock()
	n, err := c.readerLocked(id)
	if err == nil && !n.crashed && !n.hung {
		err = fmt.Errorf("%s is not down", id)
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	crashed := n.crashed
	if !crashed {
		err = n.resume()
	}
	w := c.writer
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if crashed {
		if err := n.Start(ctx); err != nil {
			return err
		}
	}
	if err := n.Follow(ctx, w.Node, true); err != nil { // the writer may have changed since
		return err
	}
	if err := w.SetSync(ctx, true); err != nil {
		return err
	}
	c.mu.Lock()
	n.crashed = false
	c.standbys = append(c.standbys, n)
	standbys := append([]*node(nil), c.standbys...)
	c.mu.Unlock()
	if err := pgnode.WaitSync(ctx, w.Node, len(standbys)); err != nil {
		return err
	}
	c.setDNS(w, standbys)
	return nil
}

// resume sends SIGCONT to a hung node.
func (n *node) resume() error {
	if !n.hung {
		return nil
	}
	n.hung = false
	return n.Signal(syscall.SIGCONT)
}

// SetLag makes reader id lag by d: the topology's replica_lag_in_msec
// reports d for it (Engine Aurora; an RDS Multi-AZ DB cluster publishes
// no lag in rds_tools, and pg_stat_replication.replay_lag on the writer
// shows the real one), and it really serves stale reads: its
// recovery_min_apply_delay is d (in its own configuration file, reloaded),
// so it applies each commit d after the writer made it. It still receives
// and flushes WAL at once: it acknowledges synchronous commits as before
// (synchronous_commit on waits for a flush, not for replay), a failover
// may promote it and its promotion applies what it holds at once, so an
// acknowledged commit still survives a failover. Topology changes do not
// wait for a lagging reader: it sees them up to d late. SetLag(id, 0)
// ends the lag and returns once the reader has caught up with the
// writer.
func (c *Cluster) SetLag(ctx context.Context, id string, d time.Duration) error {
	return c.onReader("SetLag", id, func() error { return c.setLag(ctx, id, d) })
}

func (c *Cluster) setLag(ctx context.Context, id string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("negative lag %v", d)
	}
	c.mu.Lock()
	n, err := c.readerLocked(id)
	if err == nil && !slices.Contains(c.standbys, n) {
		err = fmt.Errorf("%s is not a running standby", id)
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	old := n.lag
	w := c.writer
	c.mu.Unlock()
	if d == old {
		return nil
	}
	if d == 0 && old > 0 {
		// End the delay first, so that the topology's change reaches it.
		if err := c.applyLag(ctx, n, 0); err != nil {
			return err
		}
		if err := waitCaughtUp(ctx, n, w); err != nil {
			return err
		}
		return c.publishTopology(ctx)
	}
	// Publish first, while the reader still applies at once (or with its
	// old delay: publishTopology does not wait for it), then delay.
	if old == 0 {
		c.mu.Lock()
		n.lag = d
		c.mu.Unlock()
		if err := c.publishTopology(ctx); err != nil {
			return err
		}
		// publishTopology skipped it (lagging): wait here, before the delay.
		if err := waitCaughtUp(ctx, n, w); err != nil {
			return err
		}
		return c.applyLag(ctx, n, d)
	}
	if err := c.applyLag(ctx, n, d); err != nil {
		return err
	}
	return c.publishTopology(ctx)
}

// applyLag sets n's apply delay to d in its configuration and reloads it.
func (c *Cluster) applyLag(ctx context.Context, n *node, d time.Duration) error {
	c.mu.Lock()
	n.lag = d
	c.mu.Unlock()
	if err := n.WriteConf(false); err != nil {
		return err
	}
	if err := n.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	want := "0"
	if d > 0 {
		want = fmt.Sprint(d.Milliseconds())
	}
	return pgnode.Poll(ctx, func() (bool, error) {
		var got string
		err := n.QueryRow(ctx, "SELECT setting FROM pg_settings WHERE name = 'recovery_min_apply_delay'", &got)
		return err == nil && got == want, nil
	})
}

// waitCaughtUp waits until standby n has replayed everything writer w had
// written when it was called.
func waitCaughtUp(ctx context.Context, n, w *node) error {
	var lsn string
	if err := w.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text", &lsn); err != nil {
		return err
	}
	return pgnode.WaitReplayed(ctx, n.Node, lsn)
}

// Connections returns how many client backends of user are connected to
// server id now (pg_stat_activity there; the simulator's own connection
// that asks is not counted), for tests and demos of how a pool spreads
// over the readers.
func (c *Cluster) Connections(ctx context.Context, id, user string) (int, error) {
	addr := c.Addr(id)
	if addr == "" {
		return 0, fmt.Errorf("fakes/failovertest: no server %q", id)
	}
	conn, err := pgx.Connect(ctx, c.DSN(addr, "connect_timeout=5"))
	if err != nil {
		return 0, fmt.Errorf("fakes/failovertest: %s: %w", id, err)
	}
	defer conn.Close(context.Background())
	var got int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND usename = $1 AND pid <> pg_backend_pid()`, user).Scan(&got); err != nil {
		return 0, fmt.Errorf("fakes/failovertest: %s: %w", id, err)
	}
	return got, nil
}
