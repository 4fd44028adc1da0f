package failovertest

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
)

// Kind is a kind of writer failover.
type Kind string

// The failovers [Cluster.Failover] plays.
const (
	// Crash: the writer dies (pg_ctl stop -m immediate: no checkpoint, its
	// clients' connections reset, new ones refused), the replica is
	// promoted.
	Crash Kind = "crash"
	// Graceful: the writer shuts down cleanly (pg_ctl stop -m fast: its
	// clients get 57P01), the replica is promoted, as for a failover asked
	// for in the console.
	Graceful Kind = "graceful"
	// Hang: the writer's postmaster and backends are stopped (SIGSTOP): its
	// connections stay open and silent, new connections hang after the TCP
	// handshake. The replica is promoted. After Scenario.HangFor the old
	// writer is resumed (SIGCONT) and fenced at once: stopped (immediate),
	// then, with Rejoin, re-created as a standby of the new writer. While
	// it runs between the two it cannot acknowledge a write: its
	// synchronous standby is gone.
	Hang Kind = "hang"
	// Failback: a graceful failover with Rejoin, then a second one back to
	// the first writer.
	Failback Kind = "failback"
)

// Kinds returns every Kind.
func Kinds() []Kind { return []Kind{Crash, Graceful, Hang, Failback} }

// Scenario configures [Cluster.Failover]. Zero durations are zero: use
// [DemoScenario] for timings scaled from Aurora's.
type Scenario struct {
	Kind Kind
	// Detect is the time from the writer going down to the promotion of
	// the replica (Aurora's failure detection and decision).
	Detect time.Duration
	// DNSLag is the time from the promotion to the cluster endpoint moving
	// to the new writer (Aurora: up to 15–30 s). Clients' DNS caches add
	// up to Config.TTL.
	DNSLag time.Duration
	// HangFor is how long a Hang keeps the old writer stopped, from the
	// SIGSTOP. It is waited for after the DNS moved.
	HangFor time.Duration
	// Target is the server id of the standby to promote. Default: the one
	// that received the most WAL. Failback sets it to the first writer for
	// the way back.
	Target string
	// Rejoin brings the old writer back as a reader: re-created with
	// pg_basebackup as a synchronous standby of the new writer (writes
	// there fail with 25006), behind the reader endpoint. Without it the
	// old writer stays down and the new writer runs alone, not waiting
	// for a standby; a later failover then fails. Failback always rejoins.
	Rejoin bool
	// OnEvent, when set, is called after each step, on the goroutine
	// running Failover; it must not block.
	OnEvent func(Event)
}

// DemoScenario returns a scenario of kind k with timings for a demo:
// detection 2 s, DNS lag 10 s, a hang of 15 s, and Rejoin.
func DemoScenario(k Kind) Scenario {
	return Scenario{Kind: k, Detect: 2 * time.Second, DNSLag: 10 * time.Second, HangFor: 15 * time.Second, Rejoin: true}
}

// The events of a failover, in the order they happen, then those of a
// [Global]'s operations only.
const (
	EventWriterDown    = "writer down"               // stopped, crashed or hung
	EventPromoted      = "replica promoted"          // the new writer takes writes
	EventTopology      = "topology updated"          // the new writer and its standbys name it in their topology
	EventDNS           = "DNS moved"                 // the cluster (Global: global writer) endpoint resolves to the new writer
	EventResumed       = "old writer resumed"        // Hang: SIGCONT
	EventFenced        = "old writer fenced"         // Hang: stopped right after
	EventBackAsReader  = "old writer back as reader" // Rejoin: streaming, synchronous again
	EventFailbackStart = "failback"                  // Failback: the second failover starts
	EventWritesBlocked = "writes blocked"            // Global switchover: the writer refuses writes (25006)
	EventSynced        = "secondary synchronized"    // Global switchover: the secondary replayed all the writer wrote
	EventRegionDown    = "Region down"               // Global failover: the primary Region's servers crashed, its link cut
	EventDemoted       = "old primary demoted"       // Global: the old primary Region streams from the new writer, read-only
)

// Event is one step of a failover, when it was done. Server is the server
// id it concerns.
type Event struct {
	At     time.Time `json:"at"`
	Name   string    `json:"event"`
	Server string    `json:"server"`
}

// Result describes a failover that was played.
type Result struct {
	Kind                 Kind
	OldWriter, NewWriter string // server ids; equal after a Failback
	Events               []Event
}

// At returns when the first event named name happened.
func (r Result) At(name string) (time.Time, bool) {
	for _, e := range r.Events {
		if e.Name == name {
			return e.At, true
		}
	}
	return time.Time{}, false
}

// Failover plays scenario s and returns when it is done (the old writer
// back as a reader, with Rejoin) or ctx ends. It blocks; run it on a
// goroutine of your own to drive a workload meanwhile. It needs a standby:
// after a failover without Rejoin it fails.
func (c *Cluster) Failover(ctx context.Context, s Scenario) (Result, error) {
	c.failing.Lock()
	defer c.failing.Unlock()
	res := Result{Kind: s.Kind}
	emit := func(name, server string) {
		e := Event{At: time.Now(), Name: name, Server: server}
		res.Events = append(res.Events, e)
		if s.OnEvent != nil {
			s.OnEvent(e)
		}
	}
	var err error
	switch s.Kind {
	case Crash, Graceful, Hang:
		res.OldWriter, res.NewWriter, err = c.failover(ctx, s, emit)
	case Failback:
		s.Rejoin = true
		first := s
		first.Kind = Graceful
		if res.OldWriter, _, err = c.failover(ctx, first, emit); err == nil {
			emit(EventFailbackStart, res.OldWriter)
			back := first
			back.Target = res.OldWriter
			_, res.NewWriter, err = c.failover(ctx, back, emit)
		}
	default:
		err = fmt.Errorf("unknown kind %q", s.Kind)
	}
	if err != nil {
		return res, fmt.Errorf("fakes/failovertest: failover %s: %w", s.Kind, err)
	}
	return res, nil
}

func (c *Cluster) failover(ctx context.Context, s Scenario, emit func(name, server string)) (oldID, newID string, err error) {
	c.mu.Lock()
	old, standbys := c.writer, append([]*node(nil), c.standbys...)
	c.mu.Unlock()
	if len(standbys) == 0 {
		return old.ID, "", errors.New("no standby to promote (an earlier failover without Rejoin?)")
	}
	nw := standbys[0]

	switch s.Kind {
	case Crash:
		err = old.Stop(ctx, "immediate")
	case Graceful:
		err = old.Stop(ctx, "fast")
	case Hang:
		err = old.Signal(syscall.SIGSTOP)
	}
	if err != nil {
		return old.ID, nw.ID, fmt.Errorf("stopping the writer: %w", err)
	}
	down := time.Now()
	emit(EventWriterDown, old.ID)

	if err := pgnode.Sleep(ctx, s.Detect); err != nil {
		return old.ID, nw.ID, err
	}
	nw, others, err := pick(ctx, standbys, s.Target)
	if err != nil {
		return old.ID, "", err
	}
	if s.Target != "" {
		// Aurora's storage is shared: whichever reader is promoted has
		// every acknowledged commit. Here a commit waits for any one
		// standby (ANY 1), so a chosen target may lack what another
		// acknowledged: it first streams the rest from the most
		// advanced one.
		if err := catchUp(ctx, nw, others); err != nil {
			return old.ID, nw.ID, fmt.Errorf("catching %s up: %w", nw.ID, err)
		}
	}
	if len(others) > 0 {
		// Synchronous from its first commit: the setting is read by a
		// standby but takes effect at the promotion.
		if err := nw.SetSync(ctx, true); err != nil {
			return old.ID, nw.ID, err
		}
	}
	if err := nw.Promote(ctx); err != nil {
		return old.ID, nw.ID, fmt.Errorf("promoting %s: %w", nw.ID, err)
	}
	if err := pgnode.WaitWritable(ctx, nw.Node); err != nil {
		return old.ID, nw.ID, fmt.Errorf("promoting %s: %w", nw.ID, err)
	}
	promoted := time.Now()
	c.mu.Lock()
	c.writer, c.standbys = nw, others
	nw.lag = 0 // a writer applies at once; its next basebackup (a rejoin) has no delay
	c.mu.Unlock()
	emit(EventPromoted, nw.ID)
	for _, o := range others {
		if err := o.Follow(ctx, nw.Node, true); err != nil {
			return old.ID, nw.ID, fmt.Errorf("%s following %s: %w", o.ID, nw.ID, err)
		}
	}
	if err := pgnode.WaitSync(ctx, nw.Node, len(others)); err != nil {
		return old.ID, nw.ID, fmt.Errorf("standbys following %s: %w", nw.ID, err)
	}

	if err := c.publishTopology(ctx); err != nil {
		return old.ID, nw.ID, fmt.Errorf("topology: %w", err)
	}
	emit(EventTopology, nw.ID)

	if err := pgnode.Sleep(ctx, time.Until(promoted.Add(s.DNSLag))); err != nil {
		return old.ID, nw.ID, err
	}
	c.setDNS(nw, others)
	emit(EventDNS, nw.ID)

	if s.Kind == Hang {
		if err := pgnode.Sleep(ctx, time.Until(down.Add(s.HangFor))); err != nil {
			return old.ID, nw.ID, err
		}
		if err := old.Signal(syscall.SIGCONT); err != nil {
			return old.ID, nw.ID, fmt.Errorf("resuming %s: %w", old.ID, err)
		}
		emit(EventResumed, old.ID)
		if err := old.Stop(ctx, "immediate"); err != nil {
			return old.ID, nw.ID, fmt.Errorf("fencing %s: %w", old.ID, err)
		}
		emit(EventFenced, old.ID)
	}

	if s.Rejoin {
		if err := c.rejoin(ctx, old, nw); err != nil {
			return old.ID, nw.ID, fmt.Errorf("rejoining %s: %w", old.ID, err)
		}
		emit(EventBackAsReader, old.ID)
	}
	return old.ID, nw.ID, nil
}

// rejoin re-creates old as a synchronous standby of w.
func (c *Cluster) rejoin(ctx context.Context, old, w *node) error {
	if err := old.Basebackup(ctx, w.Node); err != nil {
		return err
	}
	if err := w.SetSync(ctx, true); err != nil {
		return err
	}
	c.mu.Lock()
	c.standbys = append(c.standbys, old)
	standbys := append([]*node(nil), c.standbys...)
	c.mu.Unlock()
	if err := pgnode.WaitSync(ctx, w.Node, len(standbys)); err != nil {
		return err
	}
	if err := c.publishTopology(ctx); err != nil {
		return err
	}
	c.setDNS(w, standbys)
	return nil
}

// pick chooses the standby to promote: target, or the one that received
// the most WAL, which holds every acknowledged commit (each was flushed by
// at least one standby, and WAL is one sequence). It returns the others.
func pick(ctx context.Context, standbys []*node, target string) (*node, []*node, error) {
	best, bestLSN := -1, uint64(0)
	for i, n := range standbys {
		if target != "" {
			if n.ID == target {
				best = i
			}
			continue
		}
		lsn, err := n.Received(ctx)
		if err != nil {
			continue
		}
		if best < 0 || lsn > bestLSN {
			best, bestLSN = i, lsn
		}
	}
	if best < 0 {
		if target != "" {
			return nil, nil, fmt.Errorf("%s is not a standby", target)
		}
		return nil, nil, errors.New("no standby answers")
	}
	others := append(append([]*node(nil), standbys[:best]...), standbys[best+1:]...)
	return standbys[best], others, nil
}

// catchUp makes target receive the WAL that the most advanced of others
// received (a cascade from it) when it has less.
func catchUp(ctx context.Context, target *node, others []*node) error {
	var best *node
	var bestLSN uint64
	for _, o := range others {
		if lsn, err := o.Received(ctx); err == nil && lsn > bestLSN {
			best, bestLSN = o, lsn
		}
	}
	if have, err := target.Received(ctx); best == nil || err == nil && have >= bestLSN {
		return err
	}
	if err := target.Follow(ctx, best.Node, true); err != nil {
		return err
	}
	return pgnode.Poll(ctx, func() (bool, error) {
		have, err := target.Received(ctx)
		return err == nil && have >= bestLSN, nil
	})
}
