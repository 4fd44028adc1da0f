// Command readers plays the life of an Aurora cluster's readers on this
// machine and runs the same read workload through a plain pgxpool and
// through a holdfast pool, both on the reader endpoint, side by side.
//
// It starts a simulated Aurora cluster (package fakes/failovertest): a
// writer and -readers readers, real PostgreSQL servers kept in step by
// physical replication, with RDS's names in a fake DNS. Like Aurora's, the
// reader endpoint answers each lookup with one reader at random, and the
// clients read it through a cache with a TTL (-dns-ttl, 5 s as Aurora
// publishes). Each client has a pool of -pool connections (MinConns =
// MaxConns, so they open at the start) under its own login role, so that
// the simulator counts each client's connections per reader
// (pg_stat_activity); -workers workers per client run a read that returns
// the server that answered it (SELECT aurora_db_instance_identifier()),
// each tried once, bounded by -request-timeout, ok or failed.
//
// The phases, one run, both clients on the same cluster at once:
//
//   - steady (-steady): the connections per reader, sampled every 250 ms;
//     its figure is the largest max/min over the readers of any sample.
//   - add: a reader joins (Cluster.AddReader: the topology and the reader
//     endpoint list it); -join-wait (10 s) later, its connections of each
//     client ÷ its fair share (the client's reader connections ÷ the
//     readers).
//   - crash: a reader dies (pg_ctl stop -m immediate), the one with most of
//     the plain pool's connections; it stays in the topology and behind
//     the reader endpoint, as on Aurora until the failure is detected. Per
//     client: the failed reads, those that started after the crash
//     (beyond the reads in flight), and the time from the crash until
//     every worker reads again (-crash-for of workload before the next
//     phase; the figures count to the end of the run).
//   - lag: another reader, the one that served most of holdfast's reads
//     since the crash, lags -lag (the topology's replica_lag_in_msec
//     and a real recovery_min_apply_delay). holdfast runs with
//     Readers.MaxLag -max-lag and RefreshInterval -refresh (1 s here, so
//     that "MaxLag + one topology refresh" is short; the default while a
//     reader pool is open is Readers.RefreshInterval, 5 s):
//     the reads served by the lagging reader that started after MaxLag +
//     one refresh from the lag (-lag-for of workload).
//
// The holdfast client is holdfast.New(holdfast.WithFailover(failover.Config{
// RefreshInterval: -refresh, Readers: failover.ReaderConfig{MaxLag:
// -max-lag}})) and Factory.NewPool: each new connection by the reader
// endpoint dials the reader of the monitor's topology with the fewest of
// the pool's connections, a reader that joins gets its share (the busiest
// readers' surplus connections are retired), a reader lagging beyond
// MaxLag gets no new connection and the pool's connections to it are
// retired. The plain client is pgxpool with the same
// config: its connections go where the cached DNS answer says.
//
// It prints a progress line per second (phase, reads ok and failed per
// client in that second, connections per reader per client), the
// connections and reads per reader at the end of each phase, a table
// (rows: requests, failed, reader connections max/min, new reader share,
// resume after crash, lagging reads; columns pgxpool, holdfast), the goals
// and a legend. With -json it prints one JSON object on stdout instead (its
// clients array: name, requests, failed, reader_connections_max_min,
// new_reader_share, resume_after_crash_ms, lagging_reads, and more; the
// phases and the samples too); progress goes to stderr.
//
// Run it with: go run ./examples/readers (about 40 s: the cluster's start
// and the added reader's pg_basebackup take a few seconds each); -json for
// the JSON object; -v for holdfast's logs on stderr. It needs only Go and
// the PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup on PATH or
// in a usual place).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// options are the command's flags.
type options struct {
	harness.Common               // Name: the cluster's; Workers: read workers per client
	Readers        int           // readers at the start
	Pool           int           // connections per pool (MinConns = MaxConns)
	Steady         time.Duration // the steady phase
	JoinWait       time.Duration // from the added reader joining to its share's measure
	CrashFor       time.Duration // workload after the crash
	Lag            time.Duration // the lagging reader's lag
	MaxLag         time.Duration // holdfast's Readers.MaxLag
	LagFor         time.Duration // workload after MaxLag + one refresh from the lag
	Refresh        time.Duration // holdfast's RefreshInterval
	RequestTimeout time.Duration // bounds each read
	Sample         time.Duration // connection sampling interval
	Seed           uint64        // the reader endpoint's random answers (0: random)
}

func defaultOptions() options {
	return options{
		Common: harness.Common{Workers: 4, Think: 10 * time.Millisecond, DNSTTL: failovertest.DefaultTTL,
			Name: failovertest.DefaultName},
		Readers:        3,
		Pool:           12,
		Steady:         5 * time.Second,
		JoinWait:       10 * time.Second,
		CrashFor:       5 * time.Second,
		Lag:            3 * time.Second,
		MaxLag:         time.Second,
		LagFor:         5 * time.Second,
		Refresh:        time.Second,
		RequestTimeout: 2 * time.Second,
		Sample:         250 * time.Millisecond,
	}
}

// command is the command: its flags, its run, its table.
var command = harness.Command[options, *Result]{Name: "readers", Defaults: defaultOptions, Flags: (*options).flags, Run: run, Print: (*Result).print}

func main() { command.Exit() }

// flags defines the command's flags into o and returns what checks them
// once parsed (package harness prints usage and errors).
func (o *options) flags(fs *harness.FlagSet) (check func() error) {
	fs.Common(&o.Common, "read workers per client", "pause between a worker's reads")
	fs.IntVar(&o.Readers, "readers", o.Readers, "readers at the start (one more joins mid-run)")
	fs.IntVar(&o.Pool, "pool", o.Pool, "connections per pool (MinConns = MaxConns); a multiple of -readers and -readers+1 makes an even spread possible")
	fs.DurationVar(&o.Steady, "steady", o.Steady, "the steady phase")
	fs.DurationVar(&o.JoinWait, "join-wait", o.JoinWait, "from the added reader joining to the measure of its share")
	fs.DurationVar(&o.CrashFor, "crash-for", o.CrashFor, "workload after a reader crashes")
	fs.DurationVar(&o.Lag, "lag", o.Lag, "the lag spike of one reader")
	fs.DurationVar(&o.MaxLag, "max-lag", o.MaxLag, "holdfast's failover.ReaderConfig.MaxLag")
	fs.DurationVar(&o.LagFor, "lag-for", o.LagFor, "workload after MaxLag + one refresh from the lag spike")
	fs.DurationVar(&o.Refresh, "refresh", o.Refresh, "holdfast's failover.Config.RefreshInterval (default there: 30 s, and 5 s while a reader pool is open)")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "bound of each read")
	fs.Uint64Var(&o.Seed, "seed", 0, "seed of the reader endpoint's random answers (0: random)")
	return func() error {
		if fs.NArg() > 0 {
			return fs.Fail("unexpected arguments %q", fs.Args())
		}
		switch {
		case o.Readers < 2 || o.Readers >= failovertest.MaxReplicas:
			return fs.Fail("-readers %d: want 2 to %d (one crashes, one lags, one joins)", o.Readers, failovertest.MaxReplicas-1)
		case o.Pool < o.Readers+1:
			return fs.Fail("-pool %d: want at least -readers + 1 (%d)", o.Pool, o.Readers+1)
		}
		if err := fs.CheckWorkers(o.Common); err != nil {
			return err
		}
		if err := fs.NonNegative("think", "steady", "join-wait", "crash-for", "lag", "max-lag", "lag-for", "dns-ttl"); err != nil {
			return err
		}
		if o.Refresh <= 0 || o.RequestTimeout <= 0 {
			return fs.Fail("-refresh %v, -request-timeout %v: must be positive", o.Refresh, o.RequestTimeout)
		}
		if o.MaxLag == 0 || o.Lag <= o.MaxLag {
			return fs.Fail("-lag %v, -max-lag %v: want 0 < max-lag < lag", o.Lag, o.MaxLag)
		}
		return nil
	}
}

// run starts a cluster, plays the phases under the workload and returns
// the measurements. progress receives the live lines.
func run(ctx context.Context, o options, progress io.Writer) (*Result, error) {
	if o.Readers < 2 || o.Pool < 1 || o.Workers < 1 || o.Refresh <= 0 || o.RequestTimeout <= 0 || o.Sample <= 0 {
		return nil, fmt.Errorf("invalid options %+v", o)
	}
	// The phases' messages and the progress lines write at once.
	progress = harness.SyncWriter(progress)
	fmt.Fprintf(progress, "starting cluster %q (Aurora): a writer and %d readers (PostgreSQL, physical replication) ...\n", o.Name, o.Readers)
	c, err := failovertest.Start(ctx, failovertest.Config{Name: o.Name, Replicas: o.Readers, TTL: o.ClusterTTL(), Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	harness.ClusterMode(progress, c, "an address per server")
	clients := []*client{newClient("pgxpool"), newClient("holdfast")}
	if err := createRoles(ctx, c, clients); err != nil {
		return nil, err
	}
	// The same config for both pools: the reader endpoint through the
	// client-side DNS cache (PoolConfig sets its LookupFunc), the client's
	// own role, every connection opened at the start.
	poolCfg := func(user string) (*pgxpool.Config, error) {
		cfg, err := c.PoolConfig(c.ReaderEndpoint)
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.User = user
		cfg.MinConns, cfg.MaxConns = int32(o.Pool), int32(o.Pool)
		return cfg, nil
	}

	logger := o.Logger(&slog.HandlerOptions{Level: slog.LevelDebug})
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{
		Logger:          logger,
		RefreshInterval: o.Refresh,
		Readers:         failover.ReaderConfig{MaxLag: o.MaxLag},
	}), holdfast.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pools, err := harness.OpenPools(ctx, f, false, poolCfg) // each under its client's role
	if err != nil {
		return nil, err
	}
	defer pools.Close()
	clients[0].pool, clients[1].pool = pools.Plain, pools.Holdfast
	hfPool := pools.Holdfast
	if f.Failover(hfPool) == nil {
		return nil, errors.New("holdfast installed no failover monitor on the pool")
	}
	// Both pools open their MinConns in the background: wait for them.
	for _, cl := range clients {
		if err := waitOpen(ctx, cl.pool, o.Pool); err != nil {
			return nil, fmt.Errorf("%s: %w", cl.Name, err)
		}
	}
	fmt.Fprintf(progress, "reader endpoint %s; DNS TTL %v; pools of %d (MinConns = MaxConns), %d workers each; "+
		"holdfast RefreshInterval %v (default 5 s with a reader pool), Readers.MaxLag %v\n",
		c.ReaderEndpoint, o.DNSTTL, o.Pool, o.Workers, o.Refresh, o.MaxLag)

	// The workload, the samples and the progress lines.
	var phase atomic.Value
	phase.Store("steady")
	smp := newSampler(c, clients)
	defer smp.close()
	wl := harness.Start([]*harness.Client{clients[0].Client, clients[1].Client},
		harness.Config{Workers: o.Workers, Think: o.Think, Timeout: o.RequestTimeout, ErrorKey: errorKey})
	defer wl.Stop()
	begin := wl.Begin
	wl.Go(func(done <-chan struct{}) { smp.run(ctx, &phase, o.Sample, done) })
	wl.Progress(progress, func(b *strings.Builder, counts []harness.Count) {
		fmt.Fprintf(b, "  %-6s", phase.Load().(string))
		s, _ := smp.last()
		for _, c := range counts {
			fmt.Fprintf(b, " | %-8s ok %4d fail %3d conns %s", c.Name, c.OK, c.Failed, perReader(s.Conns[c.Name]))
		}
	})

	res := &Result{Engine: failovertest.Aurora, ReadersAtStart: o.Readers, PoolSize: o.Pool, Workers: o.Workers,
		RefreshMS: ms(o.Refresh), MaxLagMS: ms(o.MaxLag), LagMS: ms(o.Lag), DNSTTLMS: ms(o.DNSTTL), JoinWaitMS: ms(o.JoinWait),
		LagCutoffAfterMS: ms(o.MaxLag + o.Refresh)}
	var phases []Phase
	mark := func(name string) {
		now := time.Now()
		if n := len(phases); n > 0 {
			phases[n-1].end = now
		}
		phases = append(phases, Phase{Name: name, start: now})
		phase.Store(name)
	}
	mark("steady")
	original := c.Readers()

	// Steady.
	if err := harness.Sleep(ctx, o.Steady); err != nil {
		return nil, err
	}

	// A reader joins.
	mark("add")
	fmt.Fprintf(progress, "adding a reader (pg_basebackup from the writer) ...\n")
	addStart := time.Now()
	added, err := c.AddReader(ctx)
	if err != nil {
		return nil, err
	}
	joined := time.Now()
	res.AddedReader, res.AddReaderTookMS = added, ms(joined.Sub(addStart))
	fmt.Fprintf(progress, "reader %s joined (AddReader took %v); its share in %v\n", added, joined.Sub(addStart).Round(time.Millisecond), o.JoinWait)
	if err := harness.Sleep(ctx, time.Until(joined.Add(o.JoinWait))); err != nil {
		return nil, err
	}
	share := map[string][2]int{} // client → {its connections on the added reader, on every reader}
	for _, id := range c.Readers() {
		counts, err := countOn(ctx, c, id, smp.users)
		if err != nil {
			return nil, err
		}
		for _, cl := range clients {
			sh := share[cl.Name]
			sh[1] += counts[cl.Name]
			if id == added {
				sh[0] = counts[cl.Name]
			}
			share[cl.Name] = sh
		}
	}
	readersAfterJoin := len(c.Readers())

	// A reader crashes: the one with most of the plain pool's connections
	// (the fault bites where it should), else the first.
	mark("crash")
	crashed := original[0]
	if last, ok := smp.last(); ok {
		most := -1
		for _, id := range original {
			if n := last.Conns[clients[0].Name][id]; n > most {
				crashed, most = id, n
			}
		}
	}
	fmt.Fprintf(progress, "crashing reader %s (pg_ctl stop -m immediate; it stays in the topology and DNS) ...\n", crashed)
	smp.down(crashed)
	crashAt := time.Now()
	if err := c.CrashReader(ctx, crashed); err != nil {
		return nil, err
	}
	crashDone := time.Now()
	res.CrashedReader = crashed
	servedBefore := clients[1].servedSoFar()
	if err := harness.Sleep(ctx, o.CrashFor); err != nil {
		return nil, err
	}

	// A lag spike on another reader: the one that served most of
	// holdfast's reads since the crash (so that the spike bites holdfast,
	// whose goal it is), else the first running one.
	mark("lag")
	lagging, most := "", -1
	servedNow := clients[1].servedSoFar()
	for _, id := range c.Readers() {
		if id == crashed {
			continue
		}
		if n := servedNow[id] - servedBefore[id]; n > most {
			lagging, most = id, n
		}
	}
	fmt.Fprintf(progress, "reader %s lags %v (MaxLag %v, refresh %v: reads on it after %v count) ...\n", lagging, o.Lag, o.MaxLag, o.Refresh, o.MaxLag+o.Refresh)
	lagAt := time.Now()
	if err := c.SetLag(ctx, lagging, o.Lag); err != nil {
		return nil, err
	}
	res.LaggingReader = lagging
	cutoff := lagAt.Add(o.MaxLag + o.Refresh)
	if err := harness.Sleep(ctx, time.Until(cutoff.Add(o.LagFor))); err != nil {
		return nil, err
	}
	wl.Stop()
	end := time.Now()
	phases[len(phases)-1].end = end

	measure(res, clients, phases, smp.samples, moments{begin: begin, original: original, added: added, joined: joined,
		share: share, readersAfterJoin: readersAfterJoin, crashAt: crashAt, crashDone: crashDone, lagging: lagging, lagAt: lagAt, cutoff: cutoff})
	return res, nil
}

// createRoles creates each client's login role on the writer and waits
// until every reader has replayed them: each client's connections are
// counted by its role.
func createRoles(ctx context.Context, c *failovertest.Cluster, clients []*client) error {
	w, err := pgx.Connect(ctx, c.DSN(c.Addr(c.Writer())))
	if err != nil {
		return err
	}
	defer w.Close(context.Background())
	var names []string
	for _, cl := range clients {
		if _, err := w.Exec(ctx, "CREATE ROLE "+pgx.Identifier{cl.Name}.Sanitize()+" LOGIN SUPERUSER"); err != nil {
			return err
		}
		names = append(names, cl.Name)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, id := range c.Readers() {
		for {
			n, err := rolesOn(wctx, c, id, names)
			if err == nil && n == len(names) {
				break
			}
			if err := harness.Sleep(wctx, 50*time.Millisecond); err != nil {
				return fmt.Errorf("reader %s never replayed the roles: %w", id, err)
			}
		}
	}
	return nil
}

func rolesOn(ctx context.Context, c *failovertest.Cluster, id string, names []string) (int, error) {
	conn, err := pgx.Connect(ctx, c.DSN(c.Addr(id)))
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = ANY($1)", names).Scan(&n)
	return n, err
}

// waitOpen waits until pool has n connections open (dials under way not
// counted), at most 30 s.
func waitOpen(ctx context.Context, pool *pgxpool.Pool, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	open := func() int32 { s := pool.Stat(); return s.IdleConns() + s.AcquiredConns() }
	for open() < int32(n) {
		if err := harness.Sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("%d of %d connections open: %w", open(), n, err)
		}
	}
	return nil
}
