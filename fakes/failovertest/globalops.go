package failovertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
)

// GlobalScenario configures [Global.Switchover] and [Global.Failover].
// Zero durations are zero.
type GlobalScenario struct {
	// Detect is, for a Failover, the time from the primary Region going
	// down to the promotion (the outage noticed and FailoverGlobalCluster
	// called). A Switchover ignores it.
	Detect time.Duration
	// DNSLag is the time from the promotion to the global writer endpoint
	// moving to the new primary Region (Aurora's DNS, then clients' caches
	// for up to GlobalConfig.TTL). It is waited for once every running
	// server names the new writer, at the earliest.
	DNSLag time.Duration
	// Audit is, for a Failover, a table (column id, in database
	// postgres; an SQL identifier, used as given) whose rows the old
	// writer had and the new one lacks are listed in GlobalResult.Lost.
	Audit string
	// Rejoin brings, for a Failover, the old primary Region back as the
	// secondary once the global writer endpoint moved: each of its
	// servers a fresh base backup of the new writer, streaming from it
	// through the link (its first server) or from that one (its readers),
	// read-only. Without it they stay down, and the next Switchover or
	// Failover fails. A Switchover always demotes the old primary Region
	// to the secondary.
	Rejoin bool
	// OnEvent, when set, is called after each step, on the goroutine
	// running the operation; it must not block.
	OnEvent func(Event)
}

// GlobalResult describes an operation of a [Global].
type GlobalResult struct {
	OldRegion, NewRegion string // the primary Region before and after
	OldWriter, NewWriter string // server ids
	Events               []Event
	// RPOLag is, for a Failover, the secondary's rpo_lag_in_msec last
	// measured before the primary Region went down: about how much of
	// the old primary's last writes the promotion lost.
	RPOLag time.Duration
	// Lost is, for a Failover with GlobalScenario.Audit, the ids of that
	// table that the old writer had committed and the new writer lacks,
	// sorted: the commits the old primary Region had not replicated (most
	// acknowledged to their clients, the last ones perhaps not yet).
	Lost []int64
}

// At returns when the first event named name happened.
func (r GlobalResult) At(name string) (time.Time, bool) {
	return Result{Events: r.Events}.At(name)
}

// Switchover plays a managed switchover (SwitchoverGlobalCluster, no data
// loss) to the secondary Region, and returns once the global writer
// endpoint moved or ctx ends. It blocks; run it on a goroutine of your
// own to drive a workload meanwhile. The steps are [Global]'s.
func (g *Global) Switchover(ctx context.Context, s GlobalScenario) (GlobalResult, error) {
	return g.operate(ctx, "switchover", s, g.switchover)
}

// Failover plays a failover with data loss (FailoverGlobalCluster
// --allow-data-loss) to the secondary Region, and returns once the
// global writer endpoint moved (and, with Rejoin, the old primary Region
// is back as the secondary) or ctx ends. It blocks. The steps are
// [Global]'s.
func (g *Global) Failover(ctx context.Context, s GlobalScenario) (GlobalResult, error) {
	return g.operate(ctx, "failover", s, g.failover)
}

// globalOp is one operation's state: its scenario, Regions and writers,
// its connections and its result.
type globalOp struct {
	s          GlobalScenario
	from, to   *region // the primary Region before and after
	old, nw    *node
	cs         conns
	res        GlobalResult
	promotedAt time.Time
}

func (o *globalOp) emit(name, server string) {
	e := Event{At: time.Now(), Name: name, Server: server}
	o.res.Events = append(o.res.Events, e)
	if o.s.OnEvent != nil {
		o.s.OnEvent(e)
	}
}

// operate runs op, one operation at a time, on the Regions of the moment:
// every server of the secondary must run, and so must the primary's for a
// switchover.
func (g *Global) operate(ctx context.Context, what string, s GlobalScenario, op func(context.Context, *globalOp) error) (GlobalResult, error) {
	g.op.Lock()
	defer g.op.Unlock()
	g.mu.Lock()
	o := &globalOp{s: s, from: g.regions[g.primary], to: g.regions[1-g.primary], old: g.writer, cs: conns{}}
	var down []string
	for _, n := range g.nodes {
		if n.crashed && (n.region == o.to.Name || what == "switchover") {
			down = append(down, n.ID)
		}
	}
	closed := g.closed
	g.mu.Unlock()
	defer o.cs.close()
	o.nw = o.to.nodes[0]
	o.res = GlobalResult{OldRegion: o.from.Name, NewRegion: o.to.Name, OldWriter: o.old.ID, NewWriter: o.nw.ID}
	var err error
	switch {
	case closed:
		err = errors.New("closed")
	case len(down) > 0:
		err = fmt.Errorf("servers %v are down (a failover without Rejoin?)", down)
	default:
		err = op(ctx, o)
	}
	if err != nil {
		return o.res, fmt.Errorf("fakes/failovertest: global %s: %w", what, err)
	}
	return o.res, nil
}

// switchover: the writer stops taking writes, the secondary catches up,
// the writer shuts down (its last WAL reaching the secondary), the
// secondary's first server is promoted, the old writer restarts as a
// standby of it through the link, its readers following it, and the
// global writer endpoint moves.
func (g *Global) switchover(ctx context.Context, o *globalOp) error {
	old, nw := o.old, o.nw
	old.readOnly = true
	if err := old.SetSync(ctx, true); err != nil {
		return err
	}
	if err := pgnode.Poll(ctx, func() (bool, error) {
		var on string
		err := old.QueryRow(ctx, "SHOW default_transaction_read_only", &on)
		return err == nil && on == "on", nil
	}); err != nil {
		return fmt.Errorf("%s refusing writes: %w", old.ID, err)
	}
	o.emit(EventWritesBlocked, old.ID)

	var lsn string
	if err := old.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text", &lsn); err != nil {
		return err
	}
	if err := pgnode.WaitReplayed(ctx, nw.Node, lsn); err != nil {
		return fmt.Errorf("%s catching up: %w", nw.ID, err)
	}
	o.emit(EventSynced, nw.ID)

	// A fast shutdown waits until its walsenders sent everything and the
	// standbys flushed it: the shutdown checkpoint reaches the secondary,
	// whose new timeline then starts right after it.
	if err := old.Stop(ctx, "fast"); err != nil {
		return fmt.Errorf("stopping %s: %w", old.ID, err)
	}
	old.readOnly = false // a standby from now on
	o.emit(EventWriterDown, old.ID)

	if err := g.promote(ctx, o); err != nil {
		return err
	}
	if err := old.StartStandby(ctx, g.link.node()); err != nil {
		return fmt.Errorf("restarting %s as a standby: %w", old.ID, err)
	}
	if err := g.waitDemoted(ctx, o); err != nil {
		return err
	}
	o.emit(EventDemoted, old.ID)
	return g.publish(ctx, o)
}

// failover: the link is cut and the primary Region's servers crash (what
// the secondary had not received is lost), the secondary's first server
// is promoted after Detect, the global writer endpoint moves, the old
// writer's rows are audited, and with Rejoin the old Region comes back as
// the secondary.
func (g *Global) failover(ctx context.Context, o *globalOp) error {
	o.res.RPOLag = g.lastLag().rpo
	g.link.cutOff()
	errs := make([]error, len(o.from.nodes))
	var wg sync.WaitGroup
	for i, n := range o.from.nodes {
		wg.Go(func() { errs[i] = n.Stop(ctx, "immediate") })
	}
	wg.Wait()
	g.mu.Lock()
	for _, n := range o.from.nodes {
		n.crashed = true
	}
	g.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("crashing %s: %w", o.from.Name, err)
	}
	o.emit(EventRegionDown, o.old.ID)

	if err := pgnode.Sleep(ctx, o.s.Detect); err != nil {
		return err
	}
	if err := g.promote(ctx, o); err != nil {
		return err
	}
	if err := g.publish(ctx, o); err != nil {
		return err
	}
	if o.s.Audit != "" {
		had, err := o.old.RecoveredIDs(ctx, o.s.Audit)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		has, err := o.nw.IDs(ctx, o.s.Audit)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		for _, id := range had {
			if _, ok := slices.BinarySearch(has, id); !ok {
				o.res.Lost = append(o.res.Lost, id)
			}
		}
	}
	if !o.s.Rejoin {
		return nil
	}
	if err := g.rejoin(ctx, o); err != nil {
		return fmt.Errorf("rejoining %s: %w", o.from.Name, err)
	}
	o.emit(EventDemoted, o.old.ID)
	if err := g.status(ctx, o.cs, true); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	g.setReaderDNS()
	return nil
}

// promote promotes the secondary's first server, synchronous with its
// Region's readers (which stream from it already), makes it the writer
// and the link lead to it.
func (g *Global) promote(ctx context.Context, o *globalOp) error {
	nw := o.nw
	if err := nw.SetSync(ctx, true); err != nil { // read at the promotion
		return err
	}
	if err := nw.Promote(ctx); err != nil {
		return fmt.Errorf("promoting %s: %w", nw.ID, err)
	}
	if err := pgnode.WaitWritable(ctx, nw.Node); err != nil {
		return fmt.Errorf("promoting %s: %w", nw.ID, err)
	}
	o.promotedAt = time.Now()
	g.mu.Lock()
	g.writer, g.primary = nw, 1-g.primary
	g.gen++
	g.mu.Unlock()
	o.emit(EventPromoted, nw.ID)
	g.link.retarget(nw.Addr())
	if err := pgnode.WaitSync(ctx, nw.Node, len(o.to.nodes)-1); err != nil {
		return fmt.Errorf("%s's readers following %s: %w", o.to.Name, nw.ID, err)
	}
	return nil
}

// waitDemoted waits until the old primary Region streams: its first
// server from the new writer, through the link, and its readers from
// that one.
func (g *Global) waitDemoted(ctx context.Context, o *globalOp) error {
	head := o.from.nodes[0]
	if err := pgnode.WaitStreaming(ctx, o.nw.Node, head.ID); err != nil {
		return fmt.Errorf("%s streaming from %s: %w", head.ID, o.nw.ID, err)
	}
	if err := pgnode.WaitStreaming(ctx, head.Node, ids(o.from.nodes[1:])...); err != nil {
		return fmt.Errorf("%s's readers streaming from %s: %w", o.from.Name, head.ID, err)
	}
	return nil
}

// publish writes the status on the new writer (every running server
// replays it: EventTopology), points the reader endpoints at the new
// roles, then, DNSLag after the promotion, the global writer endpoint at
// the new primary Region's cluster endpoint (EventDNS).
func (g *Global) publish(ctx context.Context, o *globalOp) error {
	if err := g.status(ctx, o.cs, true); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	o.emit(EventTopology, o.nw.ID)
	g.setReaderDNS()
	if err := pgnode.Sleep(ctx, time.Until(o.promotedAt.Add(o.s.DNSLag))); err != nil {
		return err
	}
	g.Resolver.Alias(g.GlobalEndpoint, o.to.ClusterEndpoint)
	o.emit(EventDNS, o.nw.ID)
	return nil
}

// rejoin re-creates the old primary Region's servers as the secondary:
// each a base backup of the new writer (in parallel), its first server
// then streaming through the link and its readers from that one.
func (g *Global) rejoin(ctx context.Context, o *globalOp) error {
	errs := make([]error, len(o.from.nodes))
	var wg sync.WaitGroup
	for i, n := range o.from.nodes {
		wg.Go(func() { errs[i] = n.Basebackup(ctx, o.nw.Node) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	head := o.from.nodes[0]
	if err := head.Follow(ctx, g.link.node(), true); err != nil {
		return err
	}
	for _, n := range o.from.nodes[1:] {
		if err := n.Follow(ctx, head.Node, true); err != nil {
			return err
		}
	}
	g.mu.Lock()
	for _, n := range o.from.nodes {
		n.crashed = false
	}
	g.mu.Unlock()
	return g.waitDemoted(ctx, o)
}
